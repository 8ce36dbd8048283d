package cli

import (
	"context"
	"fmt"
	neturl "net/url"
	"strings"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/driver/pgdriver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
)

// openDriver opens the store a --db value names: memory://, sqlite://PATH
// (or a bare file path), postgres://…[?schema=NAME].
func openDriver(ctx context.Context, url string) (driver.Driver, error) {
	scheme, _, hasScheme := strings.Cut(url, "://")
	switch {
	case url == "memory://" || url == "memory":
		return memdriver.New(), nil
	case !hasScheme || scheme == "sqlite" || strings.HasPrefix(url, "sqlite:"):
		return sqlitedriver.OpenURL(url)
	case scheme == "postgres" || scheme == "postgresql":
		// A schema query parameter names hopper's schema; the rest is pgx's.
		u, err := neturl.Parse(url)
		if err != nil {
			return nil, fmt.Errorf("database URL: %w", err)
		}
		q := u.Query()
		opts := &pgdriver.Options{Schema: q.Get("schema")}
		q.Del("schema")
		u.RawQuery = q.Encode()
		return pgdriver.Open(ctx, u.String(), opts)
	default:
		return nil, fmt.Errorf("unsupported database %q (scheme %q): use sqlite://PATH, postgres://… or memory://", url, scheme)
	}
}
