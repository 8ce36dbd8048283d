package hopper

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestLimitValidate(t *testing.T) {
	t.Parallel()
	for _, l := range []*Limit{{Max: -1}, {Rate: -1}, {Burst: -2}, {Order: "random"}} {
		require.ErrorIs(t, validateLimit(l), ErrInvalidInput, "%+v", l)
	}
	require.NoError(t, validateLimit(nil))
	require.NoError(t, validateLimit(FairLimit(3)))
}
