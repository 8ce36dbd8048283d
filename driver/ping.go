package driver

import "context"

// Pinger is implemented by drivers that can check, cheaply, that their store
// answers: a round trip to the database server or file. It returns nil when
// the store answered within ctx. Ping takes no params struct: it checks the
// connection and reads or writes no rows.
type Pinger interface {
	Ping(ctx context.Context) error
}
