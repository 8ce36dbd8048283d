package cli

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// readOnlyCommands are commands that read or change what a store holds:
// none of them may create the store.
var readOnlyCommands = [][]string{
	{"jobs", "list"}, {"jobs", "show", "x"}, {"jobs", "attempts", "x"}, {"jobs", "cancel", "x"}, {"jobs", "retry", "x"},
	{"dead", "list"}, {"dead", "redrive", "--all"},
	{"queues", "list"}, {"queues", "pause", "default"}, {"queues", "resume", "default"},
	{"workers", "list"}, {"workers", "show", "x"}, {"queues", "demand", "default"},
	{"runs", "list"}, {"runs", "show", "x"}, {"runs", "history", "x"}, {"runs", "tail", "x"}, {"runs", "cancel", "x"},
	{"hooks", "resume", "token", "null"},
	{"schedules"}, {"schedules", "list"}, {"schedules", "pause", "x"}, {"schedules", "resume", "x"}, {"schedules", "delete", "x"},
}

// TestReadOnlyCommandsCreateNothing: a --db naming a missing file, or a
// file without hopper's schema, is an error that names the path and says
// how to create a database; the file is not created, nor changed.
func TestReadOnlyCommandsCreateNothing(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo.db")
	foreign := filepath.Join(dir, "notes.db")
	db, err := sql.Open("sqlite", foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE notes (body TEXT)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before, err := os.ReadFile(foreign)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range readOnlyCommands {
		for _, url := range []string{missing, "sqlite://" + missing, foreign} {
			_, errOut, code := run(t, append(args, "--db", url)...)
			path := strings.TrimPrefix(url, "sqlite://")
			if code == 0 || !strings.Contains(errOut, path) || !strings.Contains(errOut, "hopper migrate --db "+url) {
				t.Errorf("%v --db %s: code %d, stderr %q: want an error naming the path and how to create a database", args, url, code, errOut)
			}
		}
		if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%v created %s", args, missing)
		}
		if after, err := os.ReadFile(foreign); err != nil || !bytes.Equal(before, after) {
			t.Fatalf("%v changed a file that is not hopper's (%v)", args, err)
		}
	}

	// The commands that store something new create it.
	if _, errOut, code := run(t, "schedules", "define", "hourly", "--cron", "@hourly", "--type", "x", "--force", "--db", missing); code != 0 {
		t.Fatalf("schedules define on a new file: %s", errOut)
	}
	if out, errOut, code := run(t, "jobs", "list", "--db", missing); code != 0 || !strings.Contains(out, "STATE") {
		t.Fatalf("jobs list once the database exists: %d %q %q", code, out, errOut)
	}
	other := filepath.Join(dir, "migrated.db")
	if _, errOut, code := run(t, "migrate", "--db", other); code != 0 {
		t.Fatalf("migrate: %s", errOut)
	}
	if _, errOut, code := run(t, "queues", "list", "--db", other); code != 0 {
		t.Fatalf("queues list after migrate: %s", errOut)
	}
}

// TestPostgresURL: a PostgreSQL URL whose schema= is malformed or empty is
// refused before connecting, not read as the default schema.
func TestPostgresURL(t *testing.T) {
	for _, url := range []string{
		"postgres://u@127.0.0.1:1/db?sslmode=disable&schema=a;b",
		"postgres://u@127.0.0.1:1/db?schema=",
		"postgres://u@127.0.0.1:1/db?schema=a&schema=b",
	} {
		_, errOut, code := run(t, "jobs", "list", "--db", url)
		if code == 0 || !strings.Contains(errOut, "schema") && !strings.Contains(errOut, "semicolon") {
			t.Errorf("--db %s: code %d, stderr %q: want the URL refused", url, code, errOut)
		}
		if strings.Contains(errOut, "connect") || strings.Contains(errOut, "dial") {
			t.Errorf("--db %s: tried to connect before refusing: %q", url, errOut)
		}
	}
	if _, errOut, code := run(t, "jobs", "list", "--db", "postgres://u:secret@127.0.0.1:1/db?schema=a;b"); code == 0 || strings.Contains(errOut, "secret") {
		t.Errorf("the error shows the password: %q", errOut)
	}
}

// TestPostgresReadOnlyCreatesNothing: a read-only command on a schema
// without hopper's tables names the schema and how to create it, and
// creates nothing.
func TestPostgresReadOnlyCreatesNothing(t *testing.T) {
	base := os.Getenv("HOPPER_TEST_POSTGRES_URL")
	if base == "" {
		t.Skip("HOPPER_TEST_POSTGRES_URL is not set")
	}
	url := freshPostgres(t, base)
	schema := url[strings.LastIndex(url, "schema=")+len("schema="):]
	for _, args := range [][]string{{"jobs", "list"}, {"queues", "list"}, {"schedules"}} {
		_, errOut, code := run(t, append(args, "--db", url)...)
		if code == 0 || !strings.Contains(errOut, schema) || !strings.Contains(errOut, "hopper migrate --db") {
			t.Errorf("%v on an empty schema: code %d, stderr %q", args, code, errOut)
		}
	}
	conn, err := pgx.Connect(context.Background(), base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil || exists {
		t.Fatalf("a read-only command created schema %s (%v)", schema, err)
	}
	if _, errOut, code := run(t, "migrate", "--db", url); code != 0 {
		t.Fatalf("migrate: %s", errOut)
	}
	if _, errOut, code := run(t, "jobs", "list", "--db", url); code != 0 {
		t.Fatalf("jobs list after migrate: %s", errOut)
	}
}
