package server

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/hopper-go/hopper"
)

// readStream serves GET /v1/runs/{id}/stream with Accept: application/json:
// one page of the run's chunks (?limit=, 1 to 1000, default 1000) from
// offset from, with the run's status read first.
func (s *Server) readStream(w http.ResponseWriter, r *http.Request, id string, from int64) {
	limit := hopper.MaxListLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > hopper.MaxListLimit {
			s.fail(w, r, badRequest("limit must be between 1 and %d", hopper.MaxListLimit))
			return
		}
		limit = n
	}
	info, err := s.c.RunGet(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	chunks, err := s.c.StreamRead(r.Context(), id, from, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := ChunkListJSON{Chunks: make([]ChunkJSON, len(chunks)), Next: from, Status: string(info.Status)}
	for i, ch := range chunks {
		out.Chunks[i] = ChunkToJSON(ch)
		out.Next = ch.Offset + 1
	}
	writeJSON(w, http.StatusOK, out)
}

// accepts reports whether the request's Accept header names mediaType.
func accepts(r *http.Request, mediaType string) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(part, ";")
		if strings.EqualFold(strings.TrimSpace(mt), mediaType) {
			return true
		}
	}
	return false
}
