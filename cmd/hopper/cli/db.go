package cli

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"strings"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/driver/pgdriver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
)

// openMode says whether a command may create the store it opens.
type openMode int

const (
	// existingStore opens a store that exists: a missing SQLite file, or a
	// file or PostgreSQL schema without hopper's tables, is an error that
	// says how to create one, and nothing is created. Commands that read or
	// change what a store holds use it.
	existingStore openMode = iota
	// createStore creates the store (and its schema) when it is missing:
	// migrate, dev, serve, bench and the commands that store something new.
	createStore
)

// openDriver opens the store a --db value names: memory://, sqlite://PATH
// (or a bare file path), postgres://…[?schema=NAME].
func openDriver(ctx context.Context, url string, mode openMode) (driver.Driver, error) {
	d, err := openURL(ctx, url, mode)
	if errors.Is(err, driver.ErrNoDatabase) {
		shown := redactURL(url)
		return nil, fmt.Errorf("%w; create it with: hopper migrate --db %s (or run hopper dev --db %s)", err, shown, shown)
	}
	return d, err
}

func openURL(ctx context.Context, url string, mode openMode) (driver.Driver, error) {
	scheme, _, hasScheme := strings.Cut(url, "://")
	switch {
	case url == "memory://" || url == "memory":
		return memdriver.New(), nil
	case !hasScheme || scheme == "sqlite" || strings.HasPrefix(url, "sqlite:"):
		path, opts, err := sqlitedriver.ParseURL(url)
		if err != nil {
			return nil, err
		}
		opts.MustExist = mode == existingStore
		return sqlitedriver.Open(path, opts)
	case scheme == "postgres" || scheme == "postgresql":
		pgURL, opts, err := parsePostgresURL(url)
		if err != nil {
			return nil, err
		}
		opts.MustExist = mode == existingStore
		return pgdriver.Open(ctx, pgURL, opts)
	default:
		return nil, fmt.Errorf("unsupported database %q (scheme %q): use sqlite://PATH, postgres://… or memory://", redactURL(url), scheme)
	}
}

// parsePostgresURL takes hopper's schema query parameter out of a
// PostgreSQL URL and returns the rest, for pgx. A query that does not parse
// (a ';' in it, say) or an empty schema= is refused rather than dropped: the
// command would otherwise use the default schema without a word.
func parsePostgresURL(raw string) (string, *pgdriver.Options, error) {
	u, err := neturl.Parse(raw)
	if err != nil {
		return "", nil, fmt.Errorf("database URL: %w", err)
	}
	q, err := neturl.ParseQuery(u.RawQuery)
	if err != nil {
		return "", nil, fmt.Errorf("database URL %s: %w (a schema= name is letters, digits and underscores)", redactURL(raw), err)
	}
	opts := &pgdriver.Options{}
	if vs, ok := q["schema"]; ok {
		if len(vs) != 1 || vs[0] == "" {
			return "", nil, fmt.Errorf("database URL %s: schema= needs one non-empty schema name", redactURL(raw))
		}
		opts.Schema = vs[0]
		q.Del("schema")
	}
	u.RawQuery = q.Encode()
	return u.String(), opts, nil
}

// redactURL hides the password of a database URL.
func redactURL(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}
