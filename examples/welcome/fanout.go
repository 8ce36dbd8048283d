package main

import (
	"context"

	"github.com/hopper-go/hopper"
)

var resize = hopper.Define("resize", func(ctx context.Context, img string) (int, error) {
	n := len(img) // stands in for your resizing: the bytes it wrote
	return n, hopper.FoldGroup(ctx, func(total int) int { return total + n })
}, nil)

var album = hopper.Define("album", func(ctx context.Context, imgs []string) (hopper.None, error) {
	job := hopper.JobFromContext(ctx)
	for _, img := range imgs {
		if err := job.Spawn(resize.Job(img, nil)); err != nil {
			return hopper.None{}, err
		}
	}
	return hopper.None{}, nil // the children are stored only if this attempt succeeds
}, nil)

// albumSize enqueues an album and waits for what its resize jobs fold.
func albumSize(ctx context.Context, c *hopper.Client, imgs []string) (int, error) {
	h, err := album.Enqueue(ctx, c, imgs, nil)
	if err != nil {
		return 0, err
	}
	g, err := h.Group(ctx) // waits until every child is done
	if err != nil {
		return 0, err
	}
	return hopper.GroupDecode[int](g) // the folded value
}
