// Command hopper is hopper's command line: a dev server with example
// workflows, an HTTP API and dashboard over an existing database, operator
// commands (jobs, dead letters, queues), migrations and benchmarks.
//
//	go run ./cmd/hopper dev
package main

import (
	"os"

	"github.com/hopper-go/hopper/cmd/hopper/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
