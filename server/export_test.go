package server

import "github.com/hopper-go/hopper/hoppertype"

// FleetNext returns a channel closed when s's fleet follower folds its
// next event from the store.
func FleetNext(s *Server) <-chan struct{} { return s.fleet.next() }

// FleetCursor is how far s's fleet follower read.
func FleetCursor(s *Server) hoppertype.ChangeCursor { return s.fleet.cursor() }

// FleetReady returns a channel closed once s's fleet follower knows where
// the store's events stood when it began: what happens after, it sees.
func FleetReady(s *Server) <-chan struct{} { return s.fleet.ready }

// FleetHistoryRead returns a channel closed once s has read the store's
// history back into its charts (or stopped at its limit).
func FleetHistoryRead(s *Server) <-chan struct{} { return s.fleet.historyDone }
