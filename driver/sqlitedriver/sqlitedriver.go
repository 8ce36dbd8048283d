// Package sqlitedriver is hopper's embedded default store: one SQLite file in
// WAL mode, on modernc.org/sqlite (pure Go, no cgo).
//
// # Writes: one writer, group commit
//
// Every write — a top-level InTx, and every write operation called on the
// Driver itself, which runs as a one-operation InTx — is queued to a single
// writer goroutine that owns the only write connection. Each time it wakes it
// takes every queued call (up to 1000), opens one BEGIN IMMEDIATE
// transaction, runs each call inside its own SAVEPOINT (released on success,
// rolled back on error, so a failing call undoes only its own writes) and
// COMMITs once. Many concurrent callers therefore share one commit and one
// WAL sync. A caller is answered only after the COMMIT that included its
// call: if that COMMIT fails, every call of the batch fails. Notifications
// raised in a call are delivered after that COMMIT, and only for calls that
// succeeded. A nested InTx on a transaction's executor is another SAVEPOINT.
//
// When SQLite rolls a batch's whole transaction back on its own (it may after
// a disk-full or I/O error; a rollback hook on the write connection tells),
// the call that hit the error fails and the other calls of the batch run
// again in the next one. Callers are never told a write committed when it
// did not.
//
// Because there is one writer per Driver and every write transaction begins
// IMMEDIATE, SQLITE_BUSY does not reach callers under normal contention, even
// with several processes on one file: the writer retries BEGIN IMMEDIATE at
// a fine interval for up to Options.BusyTimeout (SQLite's own busy handler
// backs off to one try per 100ms, which a busy writer in another process can
// starve).
//
// # Reads
//
// Reads called on the Driver outside a transaction (JobGet, JobList, ...) run
// on a separate pool of read-only connections; WAL lets them run beside the
// writer and they see every write whose call has returned.
//
// # Durability
//
// Options.Synchronous chooses between FULL (the default: an acknowledged
// write survives a power loss) and NORMAL (faster; the database stays
// consistent after any crash, but the last commits before a power loss or OS
// crash may be lost). See Options.
//
// Under FULL, a batch made only of claims (JobClaim called on the Driver)
// commits without a sync. The write-ahead log is written in commit order
// and each synced commit syncs every frame before it, so a power loss can
// only cut the log's tail: a claim is lost only with every commit after it,
// and none of those was acknowledged as durable. A lost claim leaves its jobs
// pending, their attempt not counted, to be claimed again; only a power loss
// or OS crash can lose it, and that also ends every process that saw it.
// This takes one disk sync off the path from enqueue to a job's start.
//
// # Notifications
//
// Listen and Notify use an in-process broker shared by every Driver opened on
// the same file in this process, so two clients on one file wake each other
// with the exact payloads. Changes committed by any other connection (another
// process, or a caller's own *sql.DB) are detected through PRAGMA
// data_version and announced with an empty payload on TopicJobAvailable,
// TopicJobDone and TopicGroupDone ("something changed, look again"). The
// writer reads data_version on the write connection, where it changes only
// for other connections' commits, never for the Driver's own: after every
// batch, and every 50ms while idle, as long as anyone listens.
//
// # Transactional enqueue
//
// Driver implements driver.TxInserter: JobInsertManyTx inserts jobs through a
// caller's *sql.Tx, from d.DB() or from the caller's own *sql.DB on the same
// file, so the jobs exist if and only if the caller's transaction commits.
//
// # Files
//
// A database on a network filesystem (NFS, SMB/CIFS) is refused: SQLite's
// locking is not reliable there. Schema migrations are embedded and applied
// on Open (see Options.NoMigrate and Driver.Migrate).
package sqlitedriver

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sqlite "modernc.org/sqlite"

	"github.com/hopper-go/hopper/driver"
)

// Options configure Open. The zero value (or a nil *Options) is the default.
type Options struct {
	// Synchronous is SQLite's synchronous setting: "FULL" or "NORMAL".
	//
	// FULL syncs the write-ahead log on every commit, so an acknowledged
	// enqueue or completion survives a power loss or OS crash — what hopper's
	// "nothing is lost" promise needs.
	//
	// NORMAL syncs only at checkpoints: the database stays consistent after
	// any crash, and an application crash loses nothing, but the last commits
	// before a power loss or OS crash may be rolled back (a lost completion
	// re-runs its job; a lost enqueue is lost). It is noticeably faster for
	// small transactions.
	//
	// Defaults to "FULL".
	Synchronous string
	// BusyTimeout is how long a connection waits for a lock held by another
	// connection (another process, or a caller's own *sql.DB) before failing
	// with SQLITE_BUSY. Defaults to 5s.
	BusyTimeout time.Duration
	// ReadConns is the size of the read-only connection pool. Defaults to 4.
	ReadConns int
	// NoMigrate skips applying migrations on Open. Operations then fail with a
	// clear error until the schema is current (see Driver.Migrate). A schema
	// newer than this binary knows is refused either way. Defaults to false.
	NoMigrate bool
	// MustExist makes Open refuse a path where no file exists, or a file
	// without hopper's schema, with an error wrapping driver.ErrNoDatabase;
	// it then creates and writes nothing. Tools that only read a store (the
	// hopper command's listings) set it, so a typo in a path does not leave
	// an empty database behind. Defaults to false: Open creates the file.
	MustExist bool
}

// Driver is a hopper store in one SQLite file. It is safe for concurrent use.
// Create it with Open or OpenURL and release it with Close.
type Driver struct {
	path string // cleaned absolute path of the database file
	opts Options

	wdb *sql.DB // the one write connection (SetMaxOpenConns(1))
	rdb *sql.DB // read-only pool

	w    *writer
	ckpt *checkpointer
	hub  *hub

	// rstmts caches statements prepared on the read pool, by query text.
	rstmts sync.Map // string -> *sql.Stmt

	// rollbacks counts transaction rollbacks on the write connection,
	// counted by a rollback hook, including the ones SQLite makes on its own
	// after some errors; hooked is set once the hook is installed.
	rollbacks atomic.Int64
	hooked    atomic.Bool
	// beginAborts counts the transactions begin rolled back itself because
	// BEGIN returned after its attempt's slice ran out (each one also moves
	// rollbacks).
	beginAborts atomic.Int64

	schemaOK atomic.Bool
	closed   atomic.Bool
	closeMu  sync.Mutex

	exec *executor // the Executor, in no transaction
}

// Executor returns the executor that runs the driver's operations; see
// driver.Executor for their contracts. Each operation is atomic on its own:
// a write goes through the one writer (one-operation calls share its
// transactions with others), a read through the read pool.
func (d *Driver) Executor() driver.Executor { return d.exec }

var (
	_ driver.Driver     = (*Driver)(nil)
	_ driver.TxInserter = (*Driver)(nil)
)

// maxBatch caps how many queued calls the writer runs in one transaction.
const maxBatch = 1000

// pollInterval is how often an idle writer checks PRAGMA data_version for
// commits made by other connections.
const pollInterval = 50 * time.Millisecond

// Open opens (creating if needed) the database at path and, unless
// opts.NoMigrate is set, brings its schema up to date. A nil opts means the
// defaults. It refuses a database on a network filesystem and a database
// whose schema is newer than this binary knows.
func Open(path string, opts *Options) (*Driver, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.normalize(); err != nil {
		return nil, err
	}
	abs, err := resolvePath(path)
	if err != nil {
		return nil, err
	}
	if err := checkLocalFS(filepath.Dir(abs)); err != nil {
		return nil, err
	}
	if o.MustExist {
		if err := checkExists(abs); err != nil {
			return nil, err
		}
	}

	d := &Driver{path: abs, opts: o}
	d.exec = &executor{d: d}
	base, err := sqlite.NewConnector(d.dsn(connWrite))
	if err != nil {
		return nil, fmt.Errorf("sqlitedriver: open %s: %w", abs, err)
	}
	d.wdb = sql.OpenDB(&writeConnector{Connector: base, d: d})
	d.wdb.SetMaxOpenConns(1)
	d.wdb.SetMaxIdleConns(1)
	d.wdb.SetConnMaxLifetime(0)
	d.wdb.SetConnMaxIdleTime(0)
	ctx := context.Background()
	if err := d.wdb.PingContext(ctx); err != nil {
		d.wdb.Close()
		return nil, fmt.Errorf("sqlitedriver: open %s: %w", abs, err)
	}
	if err := d.prepareSchema(ctx); err != nil {
		d.wdb.Close()
		return nil, err
	}

	d.rdb, err = sql.Open("sqlite", d.dsn(connRead))
	if err != nil {
		d.wdb.Close()
		return nil, fmt.Errorf("sqlitedriver: open %s: %w", abs, err)
	}
	d.rdb.SetMaxOpenConns(o.ReadConns)
	d.rdb.SetMaxIdleConns(o.ReadConns)
	d.rdb.SetConnMaxLifetime(0)
	d.rdb.SetConnMaxIdleTime(0)

	cdb, err := sql.Open("sqlite", d.dsn(connCheckpoint))
	if err != nil {
		d.rdb.Close()
		d.wdb.Close()
		return nil, fmt.Errorf("sqlitedriver: open %s: %w", abs, err)
	}
	d.ckpt = newCheckpointer(cdb)
	go d.ckpt.loop()

	d.hub = acquireHub(abs)
	d.w = newWriter(d)
	go d.w.loop()
	return d, nil
}

// MustOpen is Open that panics on error, for programs and examples where a
// database that does not open is fatal anyway.
func MustOpen(path string, opts *Options) *Driver {
	d, err := Open(path, opts)
	if err != nil {
		panic(err)
	}
	return d
}

// prepareSchema checks the schema version at Open and migrates unless
// NoMigrate is set.
func (d *Driver) prepareSchema(ctx context.Context) error {
	if d.opts.NoMigrate {
		v, err := readVersion(ctx, d.wdb)
		if err != nil {
			return fmt.Errorf("sqlitedriver: read schema version: %w", err)
		}
		if err := checkNotNewer(v); err != nil {
			return err
		}
		d.schemaOK.Store(v == latestVersion())
		return nil
	}
	// Another process may be writing back to back; take the write lock the
	// way the writer does, in short slices up to the busy timeout, rather
	// than through SQLite's busy handler, which such a writer can starve.
	conn, err := d.wdb.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlitedriver: migrate: %w", err)
	}
	defer conn.Close()
	tx, err := d.beginImmediate(conn)
	if err != nil {
		return fmt.Errorf("sqlitedriver: migrate: %w", err)
	}
	if err := migrate(ctx, tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitedriver: migrate: commit: %w", err)
	}
	d.schemaOK.Store(true)
	return nil
}

// OpenURL opens a database named by a URL: "sqlite:///abs/path.db",
// "sqlite://rel/path.db", "sqlite:path.db" or a plain path. A sqlite: URL may
// carry options as query parameters: synchronous (FULL or NORMAL),
// busy_timeout (a Go duration), read_conns (an integer) and no_migrate (a
// boolean).
func OpenURL(rawURL string) (*Driver, error) {
	path, opts, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return Open(path, opts)
}

// ParseURL splits a database URL, as OpenURL reads it, into the path and
// the options to pass to Open (never nil), so a caller can set more options
// before opening.
func ParseURL(rawURL string) (path string, opts *Options, err error) {
	path, opts, err = parseURL(rawURL)
	if opts == nil {
		opts = &Options{}
	}
	return path, opts, err
}

// parseURL splits a database URL into a path and options.
func parseURL(raw string) (string, *Options, error) {
	var rest string
	switch {
	case strings.HasPrefix(raw, "sqlite://"):
		rest = strings.TrimPrefix(raw, "sqlite://")
	case strings.HasPrefix(raw, "sqlite:"):
		rest = strings.TrimPrefix(raw, "sqlite:")
	default:
		if raw == "" {
			return "", nil, errors.New("sqlitedriver: empty database path")
		}
		return raw, nil, nil
	}
	opts := &Options{}
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		q, err := url.ParseQuery(rest[i+1:])
		if err != nil {
			return "", nil, fmt.Errorf("sqlitedriver: url %q: %w", raw, err)
		}
		rest = rest[:i]
		for k, vs := range q {
			v := vs[len(vs)-1]
			switch k {
			case "synchronous":
				opts.Synchronous = v
			case "busy_timeout":
				dur, err := time.ParseDuration(v)
				if err != nil {
					return "", nil, fmt.Errorf("sqlitedriver: url %q: busy_timeout: %w", raw, err)
				}
				opts.BusyTimeout = dur
			case "read_conns":
				n, err := strconv.Atoi(v)
				if err != nil {
					return "", nil, fmt.Errorf("sqlitedriver: url %q: read_conns: %w", raw, err)
				}
				opts.ReadConns = n
			case "no_migrate":
				b, err := strconv.ParseBool(v)
				if err != nil {
					return "", nil, fmt.Errorf("sqlitedriver: url %q: no_migrate: %w", raw, err)
				}
				opts.NoMigrate = b
			default:
				return "", nil, fmt.Errorf("sqlitedriver: url %q: unknown parameter %q", raw, k)
			}
		}
	}
	path, err := url.PathUnescape(rest)
	if err != nil {
		return "", nil, fmt.Errorf("sqlitedriver: url %q: %w", raw, err)
	}
	if path == "" {
		return "", nil, fmt.Errorf("sqlitedriver: url %q names no file", raw)
	}
	return path, opts, nil
}

// normalize validates o and fills in its defaults.
func (o *Options) normalize() error {
	switch strings.ToUpper(o.Synchronous) {
	case "":
		o.Synchronous = "FULL"
	case "FULL", "NORMAL":
		o.Synchronous = strings.ToUpper(o.Synchronous)
	default:
		return fmt.Errorf("sqlitedriver: Synchronous must be FULL or NORMAL, not %q", o.Synchronous)
	}
	if o.BusyTimeout < 0 {
		return fmt.Errorf("sqlitedriver: negative BusyTimeout %s", o.BusyTimeout)
	}
	if o.BusyTimeout == 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.ReadConns < 0 {
		return fmt.Errorf("sqlitedriver: negative ReadConns %d", o.ReadConns)
	}
	if o.ReadConns == 0 {
		o.ReadConns = 4
	}
	return nil
}

// resolvePath returns the cleaned absolute path of the database file, with
// symbolic links in its directory resolved, so every Driver on one file
// agrees on its name.
func resolvePath(path string) (string, error) {
	if path == "" {
		return "", errors.New("sqlitedriver: empty database path")
	}
	if path == ":memory:" || strings.HasPrefix(path, "file:") || strings.Contains(path, "?") {
		return "", fmt.Errorf("sqlitedriver: %q is not a plain file path (in-memory and URI databases are not supported; use memdriver for an in-memory store)", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sqlitedriver: resolve %q: %w", path, err)
	}
	dir, file := filepath.Split(abs)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	} else if !os.IsNotExist(err) {
		return "", fmt.Errorf("sqlitedriver: resolve %q: %w", path, err)
	}
	return filepath.Join(dir, file), nil
}

// Connection kinds, for dsn.
const (
	connRead = iota
	connWrite
	connCheckpoint
)

// dsn builds the modernc DSN of the writer, a reader or the checkpointer.
func (d *Driver) dsn(kind int) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", d.opts.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "temp_store(memory)")
	switch kind {
	case connWrite:
		// BEGIN IMMEDIATE for every transaction on the write handle, so a
		// write transaction takes the write lock up front and waits for it
		// under busy_timeout instead of failing on upgrade.
		q.Set("_txlock", "immediate")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+d.opts.Synchronous+")")
		// 4 MiB: a commit ends by truncating the page cache, which walks
		// its whole hash, so a larger cache costs every commit more than
		// its hits save (the OS keeps the file's pages either way); 32 MiB
		// measured 2–8% slower on the throughput and backlog benchmarks.
		q.Add("_pragma", "cache_size(-4000)")
		q.Add("_pragma", "journal_size_limit(67108864)") // truncate the WAL to 64 MiB after checkpoints
		// The checkpointer keeps the log short; the writer checkpoints
		// inline only if the log outgrows this many pages anyway.
		q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", writerCheckpointPages))
	case connCheckpoint:
		q.Add("_pragma", "synchronous("+d.opts.Synchronous+")")
		q.Add("_pragma", "cache_size(-2000)")
	default:
		q.Add("_pragma", "query_only(1)")
		q.Add("_pragma", "cache_size(-8000)") // 8 MiB per reader
	}
	return d.path + "?" + q.Encode()
}

// Name returns "sqlite".
func (d *Driver) Name() string { return "sqlite" }

// Path returns the cleaned absolute path of the database file.
func (d *Driver) Path() string { return d.path }

// DB returns the write handle: a *sql.DB limited to one connection, the one
// the driver writes through. Begin a transaction on it (BEGIN IMMEDIATE) to
// enqueue jobs with JobInsertManyTx together with your own writes. While such
// a transaction is open the driver's own writes wait for it, so keep it short
// and never call the Driver's write methods from inside it.
func (d *Driver) DB() *sql.DB { return d.wdb }

// Migrate brings the schema up to date; it is a no-op when it already is, and
// it refuses a schema newer than this binary knows. It runs through the
// writer, so it is safe while the Driver is in use (hopper migrate).
func (d *Driver) Migrate(ctx context.Context) error {
	if d.closed.Load() {
		return driver.ErrClosed
	}
	err := d.w.do(ctx, true, false, func(ctx context.Context, t *executor) error {
		return migrate(ctx, t.r.q)
	})
	if err == nil {
		d.schemaOK.Store(true)
	}
	return err
}

// SchemaVersion returns the version of the schema stored in the database (0
// for an empty database) and the latest version this binary knows.
func (d *Driver) SchemaVersion(ctx context.Context) (stored, known int, err error) {
	if d.closed.Load() {
		return 0, 0, driver.ErrClosed
	}
	v, err := readVersion(ctx, d.rdb)
	return v, latestVersion(), err
}

// checkSchema fails operations on a database whose schema is not current
// (opened with NoMigrate and not migrated since).
func (d *Driver) checkSchema(ctx context.Context) error {
	if d.schemaOK.Load() {
		return nil
	}
	v, err := readVersion(ctx, d.rdb)
	if err != nil {
		return fmt.Errorf("sqlitedriver: read schema version: %w", err)
	}
	if err := checkNotNewer(v); err != nil {
		return err
	}
	if v < latestVersion() {
		return fmt.Errorf("sqlitedriver: database schema is at version %d but this binary needs version %d: run migrations (Driver.Migrate, hopper migrate) or open without NoMigrate", v, latestVersion())
	}
	d.schemaOK.Store(true)
	return nil
}

// Close stops the writer (calls already queued still run), ends this
// Driver's subscriptions and closes its connections. Operations after Close
// return driver.ErrClosed; closing twice is a no-op.
func (d *Driver) Close() error {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	if d.closed.Swap(true) {
		return nil
	}
	d.w.close()
	d.hub.closeOwner(d)
	releaseHub(d.path, d.hub)
	d.rstmts.Range(func(k, v any) bool {
		v.(*sql.Stmt).Close()
		return true
	})
	d.w.closeStmts()
	return errors.Join(d.ckpt.close(), d.rdb.Close(), d.wdb.Close())
}

// Listen subscribes to notifications on topic. The subscription's channel
// buffers 64 payloads; when it is full further payloads are dropped
// (notifications are hints). It ends when ctx is done, when Close is called
// on it or when the Driver is closed.
func (d *Driver) Listen(ctx context.Context, topic string) (driver.Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d.closed.Load() {
		return nil, driver.ErrClosed
	}
	return d.hub.subscribe(ctx, d, topic)
}

// reader returns the runner for reads outside a transaction.
func (d *Driver) reader(ctx context.Context) (*runner, error) {
	if d.closed.Load() {
		return nil, driver.ErrClosed
	}
	if err := d.checkSchema(ctx); err != nil {
		return nil, err
	}
	return &runner{q: d.rdb, prep: d.readStmt, d: d}, nil
}

// readStmt returns query prepared on the read pool, preparing it once.
func (d *Driver) readStmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if s, ok := d.rstmts.Load(query); ok {
		return s.(*sql.Stmt), nil
	}
	s, err := d.rdb.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := d.rstmts.LoadOrStore(query, s); loaded {
		s.Close()
		return prev.(*sql.Stmt), nil
	}
	return s, nil
}

// writeConnector opens the write connection and installs a rollback hook on
// it, so the writer learns when SQLite rolled a batch's transaction back on
// its own (it does so after some I/O, disk-full and lock errors).
type writeConnector struct {
	sqldriver.Connector
	d *Driver
}

// Connect opens a write connection with the rollback hook installed.
func (c *writeConnector) Connect(ctx context.Context) (sqldriver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if h, ok := conn.(sqlite.HookRegisterer); ok {
		d := c.d
		h.RegisterRollbackHook(func() { d.rollbacks.Add(1) })
		d.hooked.Store(true)
	}
	return conn, nil
}
