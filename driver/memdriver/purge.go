package memdriver

import (
	"context"
	"slices"
	"strings"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

var _ driver.QueueDeleter = (*Driver)(nil)

// JobDeleteQueue deletes a queue's jobs that are not running, by id, at
// most Limit; see driver.QueueDeleter.
func (d *Driver) JobDeleteQueue(ctx context.Context, params *driver.JobDeleteQueueParams) (_ int, err error) {
	t, err := d.exec.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer d.exec.end(t, &err)
	var victims []string
	for _, e := range t.st.jobs {
		if e.row.Queue == params.Queue && e.row.State != hoppertype.JobStateRunning {
			victims = append(victims, e.row.ID)
		}
	}
	slices.SortFunc(victims, strings.Compare)
	if params.Limit > 0 && len(victims) > params.Limit {
		victims = victims[:params.Limit]
	}
	for _, id := range victims {
		t.deleteJob(id)
		t.deleteRunData(id)
		t.deleteGateData(id)
	}
	return len(victims), nil
}
