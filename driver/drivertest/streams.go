package drivertest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// streamCases cover StreamAppend and StreamRead.
func streamCases() []testCase {
	return []testCase{
		{"OffsetsFromZero", testStreamOffsets},
		{"RunsAreIndependent", testStreamRunsApart},
		{"ReadFromAndLimit", testStreamRead},
		{"ConcurrentAppendsAreDense", testStreamConcurrent},
	}
}

// streamAppend appends chunks (as strings) at now and returns the result.
func (f *fixture) streamAppend(t *testing.T, runID string, now time.Time, data ...string) []*hoppertype.StreamChunk {
	t.Helper()
	chunks := make([][]byte, len(data))
	for i, d := range data {
		chunks[i] = []byte(d)
	}
	got, err := f.x.StreamAppend(f.ctx, &driver.StreamAppendParams{RunID: runID, Chunks: chunks, Now: now})
	require.NoError(t, err)
	require.Len(t, got, len(data))
	return got
}

// streamRead reads a run's stream.
func (f *fixture) streamRead(t *testing.T, runID string, from int64, limit int) []*hoppertype.StreamChunk {
	t.Helper()
	got, err := f.x.StreamRead(f.ctx, &driver.StreamReadParams{RunID: runID, From: from, Limit: limit})
	require.NoError(t, err)
	return got
}

// requireChunks requires two lists of chunks to be equal, comparing times as
// instants.
func requireChunks(t *testing.T, want, got []*hoppertype.StreamChunk, msgAndArgs ...any) {
	t.Helper()
	norm := func(cs []*hoppertype.StreamChunk) []hoppertype.StreamChunk {
		out := make([]hoppertype.StreamChunk, len(cs))
		for i, c := range cs {
			require.NotNil(t, c, msgAndArgs...)
			out[i] = *c
			out[i].At = normTime(c.At)
		}
		return out
	}
	require.Equal(t, norm(want), norm(got), msgAndArgs...)
}

func offsets(cs []*hoppertype.StreamChunk) []int64 {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = c.Offset
	}
	return out
}

func chunkData(cs []*hoppertype.StreamChunk) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c.Data)
	}
	return out
}

func chunk(runID string, offset int64, data string, ts time.Time) *hoppertype.StreamChunk {
	return &hoppertype.StreamChunk{RunID: runID, Offset: offset, Data: []byte(data), At: ts}
}

func testStreamOffsets(t *testing.T, f *fixture) {
	r := f.insertRun(t)
	first := f.streamAppend(t, r.ID, nanos(at(time.Second)), "a", "bb", "ccc")
	want := []*hoppertype.StreamChunk{
		chunk(r.ID, 0, "a", at(time.Second)), chunk(r.ID, 1, "bb", at(time.Second)), chunk(r.ID, 2, "ccc", at(time.Second)),
	}
	requireChunks(t, want, first, "the first chunks get offsets 0, 1, 2 and At = Now")
	second := f.streamAppend(t, r.ID, at(2*time.Second), "d")
	requireChunks(t, []*hoppertype.StreamChunk{chunk(r.ID, 3, "d", at(2*time.Second))}, second)
	third := f.streamAppend(t, r.ID, at(3*time.Second), "e", "f")
	require.Equal(t, []int64{4, 5}, offsets(third), "offsets continue across calls")

	// An empty append is harmless and takes no offset.
	got, err := f.x.StreamAppend(f.ctx, &driver.StreamAppendParams{RunID: r.ID, Now: at(4 * time.Second)})
	require.NoError(t, err)
	require.Empty(t, got)

	want = append(want, second...)
	want = append(want, chunk(r.ID, 4, "e", at(3*time.Second)), chunk(r.ID, 5, "f", at(3*time.Second)))
	all := f.streamRead(t, r.ID, 0, 100)
	requireChunks(t, want, all, "the stream reads back in order")

	all[0].Data[0] = 'X'
	first[1].Data[0] = 'Y'
	require.Equal(t, "a", string(f.streamRead(t, r.ID, 0, 1)[0].Data), "chunks are copied out")
	in := [][]byte{[]byte("g")}
	_, err = f.x.StreamAppend(f.ctx, &driver.StreamAppendParams{RunID: r.ID, Chunks: in, Now: base})
	require.NoError(t, err)
	in[0][0] = 'Z'
	require.Equal(t, []string{"g"}, chunkData(f.streamRead(t, r.ID, 6, 10)), "chunks are copied in")
}

func testStreamRunsApart(t *testing.T, f *fixture) {
	a := f.insertRun(t)
	b := f.insertRun(t)
	f.streamAppend(t, a.ID, base, "a0", "a1")
	require.Equal(t, []int64{0}, offsets(f.streamAppend(t, b.ID, base, "b0")), "each run's stream starts at 0")
	require.Equal(t, []int64{2}, offsets(f.streamAppend(t, a.ID, base, "a2")))
	require.Equal(t, []int64{1, 2}, offsets(f.streamAppend(t, b.ID, base, "b1", "b2")))
	require.Equal(t, []string{"a0", "a1", "a2"}, chunkData(f.streamRead(t, a.ID, 0, 100)))
	require.Equal(t, []string{"b0", "b1", "b2"}, chunkData(f.streamRead(t, b.ID, 0, 100)))
	for _, c := range f.streamRead(t, b.ID, 0, 100) {
		require.Equal(t, b.ID, c.RunID)
	}
	require.Empty(t, f.streamRead(t, f.id(), 0, 100), "a run that does not exist has no stream")
}

func testStreamRead(t *testing.T, f *fixture) {
	r := f.insertRun(t)
	f.streamAppend(t, r.ID, base, "c0", "c1", "c2")
	f.streamAppend(t, r.ID, base, "c3", "c4")
	cases := []struct {
		name  string
		from  int64
		limit int
		want  []int64
	}{
		{"from 0", 0, 100, []int64{0, 1, 2, 3, 4}},
		{"limit", 0, 2, []int64{0, 1}},
		{"from", 2, 100, []int64{2, 3, 4}},
		{"from and limit across appends", 2, 2, []int64{2, 3}},
		{"last chunk", 4, 10, []int64{4}},
		{"limit 1", 3, 1, []int64{3}},
		{"at the end", 5, 10, nil},
		{"past the end", 100, 10, nil},
	}
	for _, c := range cases {
		got := f.streamRead(t, r.ID, c.from, c.limit)
		if len(c.want) == 0 {
			require.Empty(t, got, c.name)
			continue
		}
		require.Equal(t, c.want, offsets(got), c.name)
		for _, ch := range got {
			require.Equal(t, fmt.Sprintf("c%d", ch.Offset), string(ch.Data), c.name)
		}
	}
}

func testStreamConcurrent(t *testing.T, f *fixture) {
	const n = 20
	r := f.insertRun(t)
	results := make([][]*hoppertype.StreamChunk, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = f.x.StreamAppend(f.ctx, &driver.StreamAppendParams{
				RunID: r.ID, Chunks: [][]byte{fmt.Appendf(nil, "%d/0", i), fmt.Appendf(nil, "%d/1", i)}, Now: base,
			})
		})
	}
	close(start)
	wg.Wait()
	var all []int64
	for i := range n {
		require.NoError(t, errs[i])
		require.Len(t, results[i], 2)
		require.Equal(t, results[i][0].Offset+1, results[i][1].Offset, "one call's chunks are consecutive")
		all = append(all, offsets(results[i])...)
	}
	slices.Sort(all)
	want := make([]int64, 2*n)
	for i := range want {
		want[i] = int64(i)
	}
	require.Equal(t, want, all, "every offset from 0 is taken exactly once")
	stored := f.streamRead(t, r.ID, 0, 100)
	require.Equal(t, want, offsets(stored))
	for i := range n {
		for _, c := range results[i] {
			require.Equal(t, string(c.Data), string(stored[c.Offset].Data), "chunk %d holds what its append returned", c.Offset)
		}
	}
}
