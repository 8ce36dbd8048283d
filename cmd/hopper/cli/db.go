package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
)

// openDriver opens the store a --db value names: memory://, sqlite://PATH
// (or a bare file path), postgres://….
func openDriver(ctx context.Context, url string) (driver.Driver, error) {
	scheme, _, hasScheme := strings.Cut(url, "://")
	switch {
	case url == "memory://" || url == "memory":
		return memdriver.New(), nil
	case !hasScheme || scheme == "sqlite" || strings.HasPrefix(url, "sqlite:"):
		return sqlitedriver.OpenURL(url)
	default:
		return nil, fmt.Errorf("unsupported database %q (scheme %q): use sqlite://PATH, postgres://… or memory://", url, scheme)
	}
}
