package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

// migrator is a driver with embedded schema migrations.
type migrator interface {
	Migrate(ctx context.Context) error
}

// versioned reports the schema version a driver stores and knows.
type versioned interface {
	SchemaVersion(ctx context.Context) (stored, known int, err error)
}

func migrateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database schema migrations this binary knows",
		Long: `Apply the schema migrations embedded in this binary to --db, creating the
database (a SQLite file, a PostgreSQL schema) when it does not exist. Drivers also
migrate when they open; this command does it explicitly (for deploy scripts) and
reports the schema version. A database newer than this binary is refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			d, err := openDriver(ctx, g.db, createStore)
			if err != nil {
				return err
			}
			defer d.Close()
			if m, ok := d.(migrator); ok {
				if err := m.Migrate(ctx); err != nil {
					return err
				}
			}
			v, ok := d.(versioned)
			if !ok { // the memory driver: nothing is stored
				if g.asJSON {
					return writeJSON(g.out, map[string]any{"driver": d.Name()})
				}
				fmt.Fprintf(g.out, "%s: no stored schema to migrate\n", d.Name())
				return nil
			}
			stored, known, err := v.SchemaVersion(ctx)
			if err != nil {
				return err
			}
			if g.asJSON {
				return writeJSON(g.out, map[string]any{"driver": d.Name(), "schema_version": stored, "known_version": known})
			}
			fmt.Fprintf(g.out, "%s schema at version %d (this binary knows %d)\n", d.Name(), stored, known)
			return nil
		},
	}
}
