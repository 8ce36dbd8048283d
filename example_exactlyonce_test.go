package hopper_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
)

// openBank opens a SQLite store in a fresh directory with two accounts
// beside hopper's tables; the caller closes it and removes the directory.
func openBank() (store *sqlitedriver.Driver, dir string) {
	dir, err := os.MkdirTemp("", "hopper-bank")
	if err != nil {
		panic(err)
	}
	store, err = sqlitedriver.Open(filepath.Join(dir, "bank.db"), nil)
	if err != nil {
		panic(err)
	}
	for _, q := range []string{
		`CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0))`,
		`INSERT INTO accounts (id, balance) VALUES ('alice', 100), ('bob', 0)`,
	} {
		if _, err := store.DB().Exec(q); err != nil {
			panic(err)
		}
	}
	return store, dir
}

// balances prints the accounts.
func balances(db *sql.DB) {
	rows, err := db.Query(`SELECT id, balance FROM accounts ORDER BY id`)
	if err != nil {
		panic(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var balance int
		if err := rows.Scan(&id, &balance); err != nil {
			panic(err)
		}
		fmt.Printf("%s: %d\n", id, balance)
	}
}

// Transfer moves Amount from one account to another (the input of the
// examples' and the tests' transfers).
type Transfer struct {
	From, To string
	Amount   int
}

// move moves t's money in tx and returns what is left on its From account.
func move(ctx context.Context, tx *sql.Tx, t Transfer) (left int, err error) {
	err = tx.QueryRowContext(ctx, `UPDATE accounts SET balance = balance - ? WHERE id = ? RETURNING balance`, t.Amount, t.From).Scan(&left)
	if err != nil {
		return 0, hopper.Abort(fmt.Errorf("debit %s: %w", t.From, err)) // no money: retrying will not help
	}
	_, err = tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + ? WHERE id = ?`, t.Amount, t.To)
	return left, err
}

// A handler that moves money between two rows finishes its job in the
// transaction that moves the money (CompleteTx): the transfer and the job's
// success commit together or not at all. A worker that crashes before the
// commit leaves neither, and the job runs again; after it, the job is done
// and never runs again. Either way the money moves exactly once.
func ExampleCompleteTx() {
	store, dir := openBank()
	defer os.RemoveAll(dir)
	defer store.Close()
	db := store.DB() // the store's write connection: begin the transaction on it

	transfer := hopper.Define("transfer", func(ctx context.Context, t Transfer) (int, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return 0, err
		}
		defer tx.Rollback() // a no-op once committed
		left, err := move(ctx, tx, t)
		if err != nil {
			return 0, err
		}
		// Last before the commit: the job succeeds with this result in tx.
		if err := hopper.CompleteTx(ctx, tx, left); err != nil {
			return 0, err // the lease was lost (tx is rolled back): nothing commits
		}
		return left, tx.Commit()
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{Driver: store}, transfer)
	defer c.Stop(ctx)

	h, _ := transfer.Enqueue(ctx, c, Transfer{From: "alice", To: "bob", Amount: 30}, nil)
	left, err := h.Result(ctx)
	fmt.Println("alice has", left, "left;", err)

	h, _ = transfer.Enqueue(ctx, c, Transfer{From: "alice", To: "bob", Amount: 100}, nil)
	_, err = h.Result(ctx)
	fmt.Println("second transfer aborted:", errors.Is(err, hopper.ErrAborted))
	balances(db)
	// Output:
	// alice has 70 left; <nil>
	// second transfer aborted: true
	// alice: 70
	// bob: 30
}

// A transactional step's writes and its record in the run's history
// commit together: a replay returns the recorded result and never moves
// the money again, and a crash before the commit leaves neither, so the
// step runs again. On SQLite the step receives a *sql.Tx; on PostgreSQL a
// pgx.Tx.
func ExampleTxStep() {
	store, dir := openBank()
	defer os.RemoveAll(dir)
	defer store.Close()

	pay := hopper.Workflow("pay", func(wf hopper.WorkflowContext, t Transfer) (string, error) {
		left, err := hopper.TxStep(wf, "move", func(ctx context.Context, tx *sql.Tx) (int, error) {
			return move(ctx, tx, t)
		}, nil)
		if err != nil {
			return "", err
		}
		receipt, err := hopper.Step(wf, "receipt", func(ctx context.Context) (string, error) {
			return fmt.Sprintf("%s paid %d to %s, %d left", t.From, t.Amount, t.To, left), nil
		}, nil)
		return receipt, err
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{Driver: store}, pay)
	defer c.Stop(ctx)

	run, _ := pay.Start(ctx, c, Transfer{From: "alice", To: "bob", Amount: 40}, nil)
	fmt.Println(run.Result(ctx))
	balances(store.DB())
	// Output:
	// alice paid 40 to bob, 60 left <nil>
	// alice: 60
	// bob: 40
}
