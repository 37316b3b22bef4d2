// Running the go command for a learner's tree: at low priority when asked,
// in a process group of its own, over an overlay of replaced files.

package grader

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// lowPriorityKey marks a context whose go commands run at the lowest CPU
// priority.
type lowPriorityKey struct{}

// withLowPriority returns ctx marked so that goCommand runs its commands
// at the lowest CPU priority (nice 19).
func withLowPriority(ctx context.Context) context.Context {
	return context.WithValue(ctx, lowPriorityKey{}, true)
}

// lowPriority reports whether ctx was marked by withLowPriority.
func lowPriority(ctx context.Context) bool {
	low, _ := ctx.Value(lowPriorityKey{}).(bool)
	return low
}

// goCommand prepares the go command with args in dir, in a process group of
// its own that cancelling ctx kills whole, with its work files (builds,
// test binaries) under scratch/gowork when scratch is set.
func goCommand(ctx context.Context, dir, scratch string, args ...string) (*exec.Cmd, error) {
	name := "go"
	if lowPriority(ctx) {
		// nice execs go in the same process, so the process group and
		// its killing are unchanged; the compiler and the test binary
		// inherit the priority. Without nice, the usual one; without go,
		// exec's own error, as ever.
		goPath, gerr := exec.LookPath("go")
		if nice, err := exec.LookPath("nice"); err == nil && gerr == nil {
			name, args = nice, append([]string{"-n", "19", goPath}, args...)
		}
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	if scratch != "" {
		work := filepath.Join(scratch, "gowork")
		if err := os.MkdirAll(work, 0o755); err != nil {
			return nil, err
		}
		cmd.Env = append(cmd.Env, "GOTMPDIR="+work)
	}
	ownProcessGroup(cmd)
	setParentDeathSignal(cmd)
	cmd.WaitDelay = 5 * time.Second
	return cmd, nil
}

// writeOverlay writes a `go build -overlay` file that replaces each
// repository-relative path in replace with the file it maps to.
func writeOverlay(dir, root string, replace map[string]string) (string, error) {
	if len(replace) == 0 {
		return "", nil
	}
	m := map[string]map[string]string{"Replace": {}}
	for target, src := range replace {
		abs, err := filepath.Abs(src)
		if err != nil {
			return "", err
		}
		m["Replace"][filepath.Join(root, target)] = abs
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "overlay.json")
	return path, os.WriteFile(path, b, 0o644)
}
