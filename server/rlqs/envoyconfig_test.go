package rlqs_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	rlqsfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3" // HttpRequestHeaderMatchInput, in the filter's Any
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice/config"
)

// docBlock returns the fenced block after the marker line
// "<!-- test: name -->" of docs/service.md.
func docBlock(t *testing.T, name string) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/service.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- test: "+name+" -->\n```yaml\n")
	if !ok {
		t.Fatalf("docs/service.md has no yaml block marked %q", name)
	}
	block, _, _ := strings.Cut(rest, "```")
	return block
}

// TestEnvoyFilterConfig parses the Envoy filter configuration of
// docs/service.md with go-control-plane's types, validates it, and checks
// that it matches the service's configuration beside it: the domain, a
// bucket id that the configured bucket matches, the reporting interval.
func TestEnvoyFilterConfig(t *testing.T) {
	var y any
	if err := yaml.Unmarshal([]byte(docBlock(t, "envoy-rlqs-filter")), &y); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(y)
	if err != nil {
		t.Fatal(err)
	}
	var f hcm.HttpFilter
	if err := protojson.Unmarshal(js, &f); err != nil {
		t.Fatalf("the filter does not parse as an HttpFilter: %v", err)
	}
	if err := f.ValidateAll(); err != nil {
		t.Fatalf("the filter is not valid: %v", err)
	}
	var fc rlqsfilter.RateLimitQuotaFilterConfig
	if err := f.GetTypedConfig().UnmarshalTo(&fc); err != nil {
		t.Fatal(err)
	}
	var bs rlqsfilter.RateLimitQuotaBucketSettings
	if err := fc.GetBucketMatchers().GetOnNoMatch().GetAction().GetTypedConfig().UnmarshalTo(&bs); err != nil {
		t.Fatal(err)
	}
	if err := bs.ValidateAll(); err != nil {
		t.Fatalf("the bucket settings are not valid: %v", err)
	}

	c, err := config.Parse("docs/service.md", []byte(docBlock(t, "sluice-quota-config")))
	if err != nil {
		t.Fatalf("the quota configuration of docs/service.md: %v", err)
	}
	b := c.Quota.Buckets[0]
	if fc.GetDomain() != b.Domain {
		t.Errorf("the filter's domain %q, the bucket's %q", fc.GetDomain(), b.Domain)
	}
	ids := bs.GetBucketIdBuilder().GetBucketIdBuilder()
	for k, v := range b.Match {
		if ids[k].GetStringValue() != v {
			t.Errorf("the filter's bucket ids have %s=%q, the bucket matches %s=%q", k, ids[k].GetStringValue(), k, v)
		}
	}
	if ids[b.Actor] == nil {
		t.Errorf("the filter's bucket ids have no %q entry, the bucket's actor", b.Actor)
	}
	if got := bs.GetReportingInterval().AsDuration(); got != c.Quota.ReportInterval {
		t.Errorf("the filter reports every %v, the service expects %v", got, c.Quota.ReportInterval)
	}
	if c.Quota.TTL != 3*time.Second {
		t.Errorf("ttl %v, the documented 3s", c.Quota.TTL)
	}
}
