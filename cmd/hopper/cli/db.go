package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
)

// openDriver opens the store a --db value names: memory://, sqlite://PATH
// (or a bare file path), postgres://….
func openDriver(ctx context.Context, url string) (driver.Driver, error) {
	switch {
	case url == "memory://" || url == "memory":
		return memdriver.New(), nil
	default:
		scheme, _, _ := strings.Cut(url, "://")
		return nil, fmt.Errorf("unsupported database %q (scheme %q)", url, scheme)
	}
}
