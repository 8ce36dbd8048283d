package sqlitedriver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Filesystem magic numbers (statfs f_type) of network filesystems, on which
// SQLite's file locking, and so its safety with several connections, cannot
// be relied on.
var networkFS = map[uint32]string{
	0x6969:     "NFS",
	0x517b:     "SMB",
	0xff534d42: "CIFS",
	0xfe534d42: "SMB2",
}

// fsType returns the statfs f_type of the filesystem holding dir. Tests
// replace it.
var fsType = func(dir string) (uint32, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint32(st.Type), nil
}

// checkLocalFS refuses a database directory on a network filesystem. The
// directory must exist.
func checkLocalFS(dir string) error {
	t, err := fsType(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("sqlitedriver: directory %s does not exist", dir)
		}
		return fmt.Errorf("sqlitedriver: inspect filesystem of %s: %w", dir, err)
	}
	if name, ok := networkFS[t]; ok {
		return fmt.Errorf("sqlitedriver: %s is on a network filesystem (%s); SQLite's locking is not reliable there and the database could be corrupted: put the database on a local disk, or use PostgreSQL",
			filepath.Clean(dir), name)
	}
	return nil
}
