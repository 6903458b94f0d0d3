package file

import (
	"os/exec"
	"testing"
)

// runMount runs mount(8) (or umount(8) for "-u") with args.
func runMount(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	if len(args) > 0 && args[0] == "-u" {
		return exec.Command("umount", args[1:]...).CombinedOutput()
	}
	return exec.Command("mount", args...).CombinedOutput()
}
