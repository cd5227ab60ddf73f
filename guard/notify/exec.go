package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxOutput bounds the output of a command an Exec keeps, for the error
// of a command that fails.
const maxOutput = 4 << 10

// execPath is the PATH of the commands an Exec runs.
const execPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Placeholders lists what an Exec's arguments may hold, each replaced
// by the event's field: {event} (ban, lift, expire), {id}, {jail},
// {key}, {network} (empty for a key that is no address), {reason},
// {since} and {until} (RFC 3339, empty when unknown), {offences} and
// {source}.
var Placeholders = []string{"{event}", "{id}", "{jail}", "{key}", "{network}", "{reason}", "{since}", "{until}", "{offences}", "{source}"}

var placeholder = regexp.MustCompile(`\{[a-z_]*\}`)

// An Exec runs a command for each event, as fail2ban's actions do, but
// never through a shell: the program is Argv[0], an absolute path, run
// with arguments made from Argv's templates, each replaced placeholder
// one argument however many spaces, quotes, ';' or "$(…)" the key holds
// (a NUL byte, which no argument can hold, is passed as the four
// characters `\x00`). The command gets no stdin and an environment of
// PATH and the event's fields as SLUICE_EVENT, SLUICE_ID, SLUICE_JAIL,
// SLUICE_KEY, SLUICE_NETWORK, SLUICE_REASON, SLUICE_SINCE, SLUICE_UNTIL,
// SLUICE_OFFENCES and SLUICE_SOURCE; it runs in a process group of its
// own, killed whole when the Sink's Timeout ends the attempt. Exit status
// 0 delivers the event; any other fails the attempt, with the first 4
// KiB of the output in the error.
//
// Create Execs with NewExec; an Exec is safe for concurrent use (its
// Sink's Workers bound how many commands run at once).
type Exec struct {
	argv []string
}

// NewExec returns the Exec of argv. The error says what is wrong: no
// program, a program that is not an absolute path or holds a
// placeholder, or an unknown placeholder.
func NewExec(argv []string) (*Exec, error) {
	if err := CheckArgv(argv); err != nil {
		return nil, err
	}
	return &Exec{argv: slices.Clone(argv)}, nil
}

// CheckArgv reports what is wrong with argv as an Exec's.
func CheckArgv(argv []string) error {
	switch {
	case len(argv) == 0 || argv[0] == "":
		return errors.New("notify: exec needs argv: the program and its arguments")
	case !filepath.IsAbs(argv[0]):
		return fmt.Errorf("notify: exec program %q must be an absolute path (no PATH lookup, no shell)", argv[0])
	case strings.ContainsAny(argv[0], "{}"):
		return fmt.Errorf("notify: exec program %q must not hold a placeholder", argv[0])
	}
	for i, a := range argv {
		for _, p := range placeholder.FindAllString(a, -1) {
			if !slices.Contains(Placeholders, p) {
				return fmt.Errorf("notify: exec argv[%d] %q: unknown placeholder %s (want one of %s)", i, a, p, strings.Join(Placeholders, " "))
			}
		}
	}
	return nil
}

// fields returns the values of the placeholders for e, in the order of
// Placeholders.
func fields(e Event) []string {
	return []string{string(e.Kind), e.ID, e.Jail, e.Key, e.Network, e.Reason,
		rfc3339(e.Since), rfc3339(e.Until), strconv.Itoa(e.Offences), e.Source}
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// Args returns the command line of e: Argv with its placeholders
// replaced.
func (x *Exec) Args(e Event) []string {
	vals := fields(e)
	pairs := make([]string, 0, 2*len(vals))
	for i, p := range Placeholders {
		pairs = append(pairs, p, strings.ReplaceAll(vals[i], "\x00", `\x00`))
	}
	r := strings.NewReplacer(pairs...)
	out := make([]string, len(x.argv))
	for i, a := range x.argv {
		out[i] = r.Replace(a)
	}
	return out
}

// env returns the command's environment for e.
func env(e Event) []string {
	out := []string{execPath}
	for i, v := range fields(e) {
		name := "SLUICE_" + strings.ToUpper(strings.Trim(Placeholders[i], "{}"))
		out = append(out, name+"="+strings.ReplaceAll(v, "\x00", `\x00`))
	}
	return out
}

// Deliver runs the command of e once, killing its process group when
// ctx ends.
func (x *Exec) Deliver(ctx context.Context, e Event) error {
	args := x.Args(e)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = env(e)
	out := &capped{max: maxOutput}
	cmd.Stdout, cmd.Stderr = out, out
	ownGroup(cmd)
	cmd.WaitDelay = time.Second // a grandchild that keeps the output open is not waited for
	err := cmd.Run()
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("notify: exec %s: killed: %w", args[0], ctx.Err())
	case err != nil:
		return fmt.Errorf("notify: exec %s: %w; output: %q", args[0], err, out.String())
	}
	return nil
}

// capped keeps the first max bytes written to it, and counts the rest.
type capped struct {
	max     int
	buf     bytes.Buffer
	dropped int
}

func (c *capped) Write(p []byte) (int, error) {
	n := min(len(p), c.max-c.buf.Len())
	c.buf.Write(p[:n])
	c.dropped += len(p) - n
	return len(p), nil
}

func (c *capped) String() string {
	if c.dropped > 0 {
		return fmt.Sprintf("%s… (%d bytes more)", c.buf.String(), c.dropped)
	}
	return c.buf.String()
}
