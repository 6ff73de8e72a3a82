// bridge.go owns "acpguard serve": the host HTTP API and its event streams,
// the private ACP children, the guarded prepare bridge and the decision log.
package main

import "context"

// STUB
func runServe(ctx context.Context, sys *system, args []string) error {
	_, err := parseServeArgs(args, sys)
	return err
}
