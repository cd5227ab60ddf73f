package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the client a client: of this module it imports
// only the core and the wire types, and none of the server's weight (its
// configuration, Prometheus, YAML, OpenTelemetry), however indirectly.
// It asks go list, as a user's build would resolve them.
func TestDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the client's dependencies: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/sluicehq/sluice/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	const module = "github.com/sluicehq/sluice"
	allowed := map[string]bool{module: true, module + "/wire": true, module + "/wire/sluicepb": true, module + "/client": true}
	denied := []string{"prometheus", "yaml", "opentelemetry", "kin-openapi", "rueidis", "go-redis"}
	deps := strings.Fields(string(out))
	for _, p := range deps {
		if (p == module || strings.HasPrefix(p, module+"/")) && !allowed[p] {
			t.Errorf("the client depends on %s: of this module, only the core and wire may be its dependencies", p)
		}
		for _, d := range denied {
			if strings.Contains(p, d) {
				t.Errorf("the client depends on %s (%s): a client carries none of the server", p, d)
			}
		}
	}
	if len(deps) < 2 {
		t.Fatalf("go list -deps listed %d packages: %q", len(deps), out)
	}
}
