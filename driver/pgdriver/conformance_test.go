package pgdriver

import (
	"context"
	"database/sql"
	"testing"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/drivertest"
	"github.com/jackc/pgx/v5/stdlib"
)

// TestConformance runs the driver suite with a fresh schema per subtest, on
// one shared pool so the connection count stays low.
func TestConformance(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 12)
	drivertest.Run(t, func(t *testing.T) driver.Driver { return newTestDriver(t, pool) })
}

// TestConformanceSQLTx runs the suite's AppTx area on transactions the
// application opens through pgx's database/sql driver: the store's TxBegin
// is replaced by a *sql.Tx that TxJoin joins.
func TestConformanceSQLTx(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 8)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	drivertest.RunAppTx(t, func(t *testing.T) driver.Driver { return sqlTxDriver{newTestDriver(t, pool), db} })
}

// sqlTxDriver is a Driver whose TxBegin opens a *sql.Tx and joins it.
type sqlTxDriver struct {
	*Driver
	db *sql.DB
}

func (s sqlTxDriver) TxBegin(ctx context.Context, _ *driver.TxBeginParams) (*driver.AppTx, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	return s.TxJoin(ctx, tx, &driver.TxJoinParams{})
}
