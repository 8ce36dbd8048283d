//go:build !linux

package sqlitedriver

// checkLocalFS would refuse a database directory on a network filesystem;
// the check is implemented on Linux only.
func checkLocalFS(dir string) error { return nil }
