//go:build !unix

package notify

import "os/exec"

// ownGroup leaves cmd as it is: without process groups, cancellation
// kills the command alone.
func ownGroup(*exec.Cmd) {}
