package driver

import (
	"slices"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
)

// The change feed's arguments and rows (see "Change feed" in the package
// documentation).

// ChangeListParams are the arguments of ChangeList.
type ChangeListParams struct {
	After    hoppertype.ChangeCursor
	EntityID string
	Own      bool
	// Limit caps the changes returned; it must be > 0.
	Limit int
}

// ChangeListBeforeParams are the arguments of ChangeListBefore.
type ChangeListBeforeParams struct {
	// Before is the cursor to read back from (exclusive); the zero
	// cursor lists nothing.
	Before hoppertype.ChangeCursor
	// Limit caps the changes returned; it must be > 0.
	Limit int
}

// ChangeScanParams are the arguments of ChangeScan.
type ChangeScanParams struct {
	After  hoppertype.ChangeCursor
	Kinds  []hoppertype.ChangeKind
	Types  []string
	States []string
	// Limit caps the changes read (not only those returned), save where
	// the driver skips refused changes without reading them (see
	// Executor.ChangeScan); it must be > 0.
	Limit int
}

// ChangeScanResult is what ChangeScan found.
type ChangeScanResult struct {
	Changes []*hoppertype.Change
	Next    hoppertype.ChangeCursor
}

// MatchChange reports whether ch passes ChangeScan's filter in p.
func (p *ChangeScanParams) MatchChange(ch *hoppertype.Change) bool {
	return (len(p.Kinds) == 0 || slices.Contains(p.Kinds, ch.Kind)) &&
		(len(p.Types) == 0 || slices.Contains(p.Types, ch.Type)) &&
		(len(p.States) == 0 || slices.Contains(p.States, ch.State))
}

// ChangeTailParams are the arguments of ChangeTail (none yet).
type ChangeTailParams struct{}

// ChangeMarkParams are the arguments of ChangeMark (none yet).
type ChangeMarkParams struct{}

// CursorLeaseParams are the arguments of CursorLease.
type CursorLeaseParams struct {
	Name  string
	Owner string
	Now   time.Time
	TTL   time.Duration
}

// CursorAdvanceParams are the arguments of CursorAdvance.
type CursorAdvanceParams struct {
	Name  string
	Owner string
	At    hoppertype.ChangeCursor
	Now   time.Time
	TTL   time.Duration
}

// CursorListParams are the arguments of CursorList (none yet).
type CursorListParams struct{}

// CursorRow is a feed cursor: how far the named observer's delivery got,
// and who delivers it until when.
type CursorRow struct {
	Name      string
	Owner     string
	ExpiresAt time.Time
	At        hoppertype.ChangeCursor
	UpdatedAt time.Time
}
