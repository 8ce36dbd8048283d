package memdriver

import "time"

// heapItem is one entry of a claim index: a job id, the version of the job
// it was pushed for, and the sort keys copied from that version.
type heapItem struct {
	id       string
	version  uint64
	priority int
	runAt    time.Time
}

// pendingLess orders claimable jobs: highest priority, then earliest RunAt,
// then smallest id.
func pendingLess(a, b *heapItem) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if !a.runAt.Equal(b.runAt) {
		return a.runAt.Before(b.runAt)
	}
	return a.id < b.id
}

// scheduledLess orders waiting jobs by RunAt, then id.
func scheduledLess(a, b *heapItem) bool {
	if !a.runAt.Equal(b.runAt) {
		return a.runAt.Before(b.runAt)
	}
	return a.id < b.id
}

// itemHeap is a binary min-heap of heapItems under less.
type itemHeap struct {
	items []heapItem
	less  func(a, b *heapItem) bool
}

func (h *itemHeap) push(it heapItem) {
	h.items = append(h.items, it)
	h.up(len(h.items) - 1)
}

// peek returns the smallest item without removing it.
func (h *itemHeap) peek() (heapItem, bool) {
	if len(h.items) == 0 {
		return heapItem{}, false
	}
	return h.items[0], true
}

// pop removes and returns the smallest item.
func (h *itemHeap) pop() (heapItem, bool) {
	n := len(h.items)
	if n == 0 {
		return heapItem{}, false
	}
	top := h.items[0]
	h.items[0] = h.items[n-1]
	h.items[n-1] = heapItem{}
	h.items = h.items[:n-1]
	if len(h.items) > 0 {
		h.down(0)
	}
	return top, true
}

// filter keeps the items for which keep is true and restores heap order.
func (h *itemHeap) filter(keep func(heapItem) bool) {
	kept := h.items[:0]
	for _, it := range h.items {
		if keep(it) {
			kept = append(kept, it)
		}
	}
	for i := len(kept); i < len(h.items); i++ {
		h.items[i] = heapItem{}
	}
	h.items = kept
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *itemHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(&h.items[i], &h.items[p]) {
			return
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

func (h *itemHeap) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(&h.items[r], &h.items[l]) {
			m = r
		}
		if !h.less(&h.items[m], &h.items[i]) {
			return
		}
		h.items[i], h.items[m] = h.items[m], h.items[i]
		i = m
	}
}
