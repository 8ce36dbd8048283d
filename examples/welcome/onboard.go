package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hopper-go/hopper"
)

type Signup struct {
	Email string
}

var onboard = hopper.Workflow("onboard", func(wf hopper.WorkflowContext, s Signup) (string, error) {
	userID, err := hopper.Step(wf, "create-user", func(ctx context.Context) (string, error) {
		return createUser(ctx, s.Email) // keyed by the email: a repeat creates nothing
	}, nil)
	if err != nil {
		return "", err
	}
	if err := wf.Sleep(24 * time.Hour); err != nil { // the run suspends; no goroutine waits
		return "", err
	}
	_, err = hopper.Step(wf, "send-tips", func(ctx context.Context) (bool, error) {
		return true, sendMail(ctx, s.Email, "Tips for your first day")
	}, nil)
	return userID, err
}, nil)

// startOnboarding starts a signup's onboarding once: starting the same id
// again returns the run already started.
func startOnboarding(ctx context.Context, c *hopper.Client, email string) (*hopper.RunHandle[string], error) {
	return onboard.Start(ctx, c, Signup{Email: email}, &hopper.StartOpts{ID: "onboard:" + email})
}

// createUser and sendMail stand in for your own services.
func createUser(ctx context.Context, email string) (string, error) { return "user:" + email, nil }

func sendMail(ctx context.Context, to, subject string) error {
	fmt.Printf("mailing %q to %s\n", subject, to)
	return nil
}
