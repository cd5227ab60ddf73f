package deploy

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	bootstrap "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	// Types the Envoy file names in typed_config, registered for decoding.
	ratelimit "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/sluicehq/sluice/config"
)

// k8sObject is the part of a Kubernetes object the test reads.
type k8sObject struct {
	Kind string            `yaml:"kind"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Args  []string `yaml:"args"`
					Ports []struct {
						Name          string `yaml:"name"`
						ContainerPort int    `yaml:"containerPort"`
					} `yaml:"ports"`
					LivenessProbe  probe `yaml:"livenessProbe"`
					ReadinessProbe probe `yaml:"readinessProbe"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
		Ports []struct {
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

// probe is the part of a container's probe the test reads.
type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

// loadK8s returns the objects of deploy/kubernetes/sluice.yaml by kind,
// and the sluice configuration its ConfigMap holds, parsed by sluice.
func loadK8s(t *testing.T) (map[string]k8sObject, *config.Config) {
	t.Helper()
	data, err := os.ReadFile("kubernetes/sluice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]k8sObject{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var o k8sObject
		if err := dec.Decode(&o); err != nil {
			break
		}
		objs[o.Kind] = o
	}
	c, err := config.Parse("kubernetes/sluice.yaml ConfigMap", []byte(objs["ConfigMap"].Data["sluice.yaml"]))
	if err != nil {
		t.Fatalf("the ConfigMap's sluice.yaml: %v", err)
	}
	return objs, c
}

// TestKubernetes checks that the example's ConfigMap is a valid sluice
// configuration, that the container listens where the configuration and
// its flags say, and that the probes and the Service reach those ports.
func TestKubernetes(t *testing.T) {
	objs, c := loadK8s(t)
	for _, kind := range []string{"ConfigMap", "Deployment", "Service"} {
		if _, ok := objs[kind]; !ok {
			t.Fatalf("no %s in the example", kind)
		}
	}
	ctr := objs["Deployment"].Spec.Template.Spec.Containers[0]
	ports := map[string]int{}
	for _, p := range ctr.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if !strings.HasSuffix(c.Listen, ":"+strconv.Itoa(ports["http"])) {
		t.Errorf("listen %s is not the container's http port %d", c.Listen, ports["http"])
	}
	args := strings.Join(ctr.Args, " ")
	if !strings.Contains(args, "-config /etc/sluice/sluice.yaml") || !strings.Contains(args, "-grpc-listen 0.0.0.0:"+strconv.Itoa(ports["grpc"])) {
		t.Errorf("args %q: want the ConfigMap's file and gRPC on the grpc port %d", args, ports["grpc"])
	}
	if p := ctr.LivenessProbe.HTTPGet; p.Path != "/healthz" || p.Port != "http" {
		t.Errorf("liveness probe %+v, want /healthz on http", p)
	}
	if p := ctr.ReadinessProbe.HTTPGet; p.Path != "/readyz" || p.Port != "http" {
		t.Errorf("readiness probe %+v, want /readyz on http", p)
	}
	for _, p := range objs["Service"].Spec.Ports {
		if _, ok := ports[p.TargetPort]; !ok {
			t.Errorf("the Service targets port %q, which the container does not name", p.TargetPort)
		}
	}
}

// TestEnvoy decodes the Envoy example with Envoy's own protos, and checks
// that its rate limit filter asks sluice's gRPC port for a domain the
// Kubernetes example's configuration defines.
func TestEnvoy(t *testing.T) {
	data, err := os.ReadFile("envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrap.Bootstrap
	if err := protojson.Unmarshal(js, &b); err != nil {
		t.Fatalf("envoy.yaml is not an Envoy bootstrap: %v", err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("envoy.yaml fails Envoy's validation: %v", err)
	}
	var m hcm.HttpConnectionManager
	if err := b.StaticResources.Listeners[0].FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(&m); err != nil {
		t.Fatal(err)
	}
	var rl ratelimit.RateLimit
	if err := m.HttpFilters[0].GetTypedConfig().UnmarshalTo(&rl); err != nil {
		t.Fatalf("the first HTTP filter is not the rate limit filter: %v", err)
	}
	_, c := loadK8s(t)
	if _, ok := c.Domain(rl.Domain); !ok {
		t.Errorf("the filter asks for domain %q, which the sluice configuration does not define", rl.Domain)
	}
	cluster := rl.RateLimitService.GetGrpcService().GetEnvoyGrpc().ClusterName
	for _, cl := range b.StaticResources.Clusters {
		if cl.Name != cluster {
			continue
		}
		addr := cl.LoadAssignment.Endpoints[0].LbEndpoints[0].GetEndpoint().Address.GetSocketAddress()
		if addr.GetPortValue() != 8081 || cl.TypedExtensionProtocolOptions == nil {
			t.Errorf("cluster %s: port %d, protocol options %v; want sluice's gRPC port 8081 over HTTP/2", cluster, addr.GetPortValue(), cl.TypedExtensionProtocolOptions)
		}
		return
	}
	t.Errorf("no cluster %q for the rate limit service", cluster)
}

// TestStaticBinary builds sluice as the Dockerfile does, checks that it
// is statically linked (a distroless static image has no libc), and runs
// it in an empty directory with an empty environment: it serves, and is
// ready.
func TestStaticBinary(t *testing.T) {
	docker, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	build := regexp.MustCompile(`RUN (CGO_ENABLED=0 go build .*) -o \S+ (\./cmd/sluice)`).FindSubmatch(docker)
	if build == nil {
		t.Fatal("the Dockerfile has no static go build of ./cmd/sluice")
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	fields := strings.Fields(string(build[1]))
	cmd := exec.Command("go", append(fields[2:], "-o", bin, string(build[2]))...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), fields[0])
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary names a dynamic loader: not static")
		}
	}
	runBare(t, bin)
}

// runBare runs "sluice serve" from an empty directory with no
// environment, and checks /readyz.
func runBare(t *testing.T, bin string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "-listen", "127.0.0.1:0")
	cmd.Dir, cmd.Env = t.TempDir(), []string{}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		url, ok := strings.CutPrefix(sc.Text(), "sluice: listening on ")
		if !ok {
			continue
		}
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("/readyz of the bare binary = %d, want 200", resp.StatusCode)
		}
		return
	}
	t.Fatalf("the bare binary never said where it listens: %v", sc.Err())
}
