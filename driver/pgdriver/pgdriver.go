package pgdriver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// Options configure a Driver. The zero value (or nil) means the defaults.
type Options struct {
	// Schema is the PostgreSQL schema holding hopper's tables: 1 to 48
	// letters, digits and underscores. Defaults to "hopper".
	Schema string
	// NoMigrate skips applying migrations when the driver is made; the
	// schema must then be migrated by Driver.Migrate or by an operator. A
	// schema newer than the binary knows is still refused. Defaults to false.
	NoMigrate bool
	// MustExist refuses a database whose Schema holds no hopper tables,
	// with an error wrapping driver.ErrNoDatabase, instead of creating
	// them; an existing schema is migrated as usual. Tools that only read a
	// store (the hopper command's listings) set it, so a typo in a schema
	// name does not create an empty one. Defaults to false.
	MustExist bool
}

// Driver is a hopper store in a PostgreSQL database. It is safe for
// concurrent use.
type Driver struct {
	pool    *pgxpool.Pool
	owned   bool
	schema  string
	q       *queries
	root    *executor
	lis     *listener
	closed  atomic.Bool
	post    postCommit
	starts  startGroup
	cursors claimCursors
}

var (
	_ driver.Driver     = (*Driver)(nil)
	_ driver.TxInserter = (*Driver)(nil)
)

// New returns a driver on pool, which stays the caller's: Close does not
// close it. It migrates the schema first unless opts.NoMigrate is set.
func New(pool *pgxpool.Pool, opts *Options) (*Driver, error) {
	return newDriver(context.Background(), pool, false, opts)
}

// Open connects to url (postgres://… or postgresql://…, with any pgx or
// pgxpool parameter such as pool_max_conns) and returns a driver that owns
// the pool: Close closes it. Connections default to READ COMMITTED. It
// migrates the schema first unless opts.NoMigrate is set.
func Open(ctx context.Context, url string, opts *Options) (*Driver, error) {
	if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
		return nil, fmt.Errorf("pgdriver: open: want a postgres:// or postgresql:// URL, got %q", redact(url))
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgdriver: open: %w", err)
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["default_transaction_isolation"]; !ok {
		cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "read committed"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgdriver: open: %w", err)
	}
	d, err := newDriver(ctx, pool, true, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return d, nil
}

// redact drops the password from a URL for error messages.
func redact(url string) string {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return "…"
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if user, _, hasPass := strings.Cut(rest[:at], ":"); hasPass {
			return scheme + "://" + user + ":…@" + rest[at+1:]
		}
	}
	return url
}

func newDriver(ctx context.Context, pool *pgxpool.Pool, owned bool, opts *Options) (*Driver, error) {
	if pool == nil {
		return nil, errors.New("pgdriver: nil pool")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	if err := validateSchema(o.Schema); err != nil {
		return nil, err
	}
	d := &Driver{pool: pool, owned: owned, schema: o.Schema, q: newQueries(o.Schema)}
	d.root = &executor{d: d, q: pool}
	d.lis = newListener(d)
	if o.MustExist {
		stored, _, err := d.SchemaVersion(ctx)
		if err != nil {
			return nil, err
		}
		if stored == 0 {
			return nil, fmt.Errorf("%w: schema %q holds no hopper tables", driver.ErrNoDatabase, o.Schema)
		}
	}
	if o.NoMigrate {
		if err := d.checkVersion(ctx); err != nil {
			return nil, err
		}
	} else if err := d.Migrate(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// Name returns "postgres".
func (d *Driver) Name() string { return "postgres" }

// Executor returns the executor that runs the driver's operations on the
// pool, each atomic on its own; see driver.Executor for their contracts.
// Its InTx runs a transaction at READ COMMITTED (a nested InTx is a
// savepoint) and sends the notifications made through it, de-duplicated,
// just before the commit; a statement that fails inside aborts the
// transaction, as in PostgreSQL, so fn should return the error (or run the
// statement in a nested InTx to recover). Its JobClaim, once sent, runs to
// its end (for at most 10 s) even if ctx ends, so a claim never commits
// without its caller receiving the jobs.
func (d *Driver) Executor() driver.Executor { return d.root }

// Schema returns the PostgreSQL schema the driver uses.
func (d *Driver) Schema() string { return d.schema }

// Pool returns the connection pool the driver uses.
func (d *Driver) Pool() *pgxpool.Pool { return d.pool }

// Close ends every subscription, stops the listener connection and, when the
// driver made the pool (Open), closes it. Operations after Close return
// driver.ErrClosed; closing twice is a no-op.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.lis.close()
	// A notification send in flight ends before the pool does (and, past
	// the lock, none starts: sendLater sees closed under it).
	d.post.mu.Lock()
	d.post.mu.Unlock() //nolint:staticcheck // an empty critical section orders Close after sendLater's check
	d.post.sending.Wait()
	if d.owned {
		d.pool.Close()
	}
	return nil
}

// Listen subscribes to notifications on topic. The subscription's channel
// buffers 64 payloads and drops further ones while it is full (notifications
// are hints). Listen returns once the listener connection listens on the
// topic's channel, or once a connection attempt has failed (the driver keeps
// retrying and sends an empty payload when it is back). The subscription
// ends when ctx is done, when Close is called on it or when the driver is
// closed.
func (d *Driver) Listen(ctx context.Context, topic string) (driver.Subscription, error) {
	if d.closed.Load() {
		return nil, driverClosed("listen")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return d.lis.subscribe(ctx, topic)
}

// driverClosed is the error of an operation after Close.
func driverClosed(op string) error {
	return fmt.Errorf("pgdriver: %s: %w", op, driver.ErrClosed)
}

// codeUniqueViolation is the SQLSTATE of a unique violation.
const codeUniqueViolation = "23505"

// idConstraints are the primary keys whose violation is
// hoppertype.ErrDuplicateID: a job id, a group id, a run id, a hook token
// or an event's (run, attempt, seq).
var idConstraints = map[string]bool{
	"jobs_pkey": true, "groups_pkey": true, "runs_pkey": true, "hooks_pkey": true, "run_events_pkey": true,
}

// fail maps a database error to the driver contract's errors, in one place:
// no rows is hoppertype.ErrNotFound, a duplicate id (see idConstraints) is
// hoppertype.ErrDuplicateID, and anything after Close is driver.ErrClosed.
func (d *Driver) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	if d.closed.Load() && !errors.Is(err, driver.ErrClosed) {
		return fmt.Errorf("pgdriver: %s: %w (%w)", op, driver.ErrClosed, err)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("pgdriver: %s: %w", op, hoppertype.ErrNotFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == codeUniqueViolation && idConstraints[pgErr.ConstraintName] {
		// Not the server's Detail: it quotes the row's key values.
		return fmt.Errorf("pgdriver: %s: %w", op, hoppertype.ErrDuplicateID)
	}
	return fmt.Errorf("pgdriver: %s: %w", op, err)
}
