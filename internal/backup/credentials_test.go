package backup

import (
	"slices"
	"strings"
	"testing"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

func TestCredentialsPolicyDecide(t *testing.T) {
	s3 := func(bucket, secret string) v1alpha1.SnapshotDestination {
		return v1alpha1.SnapshotDestination{S3: &v1alpha1.S3Destination{Bucket: bucket, CredentialsSecretName: secret}}
	}
	pvc := v1alpha1.SnapshotDestination{PersistentVolumeClaim: &v1alpha1.PVCDestination{ClaimName: "c"}}
	off := CredentialsPolicy{}
	on := CredentialsPolicy{AllowAmbient: true}
	listed := CredentialsPolicy{AllowAmbient: true, Buckets: []string{"shared", "ops"}}
	// An allowlist without the flag allows nothing: the flag is the switch.
	listOnly := CredentialsPolicy{Buckets: []string{"shared"}}

	cases := []struct {
		name        string
		p           CredentialsPolicy
		d           v1alpha1.SnapshotDestination
		ambient     bool
		refusalHas  []string
		notRefusing bool
	}{
		{name: "claim, off", p: off, d: pvc, notRefusing: true},
		{name: "secret named, off", p: off, d: s3("b", "creds"), notRefusing: true},
		{name: "secret named, on: still static only", p: on, d: s3("b", "creds"), notRefusing: true},
		{name: "secret named, bucket not listed", p: listed, d: s3("other", "creds"), notRefusing: true},
		{name: "no secret, off", p: off, d: s3("b", ""), refusalHas: []string{`bucket "b"`, "--" + AllowAmbientFlag, "credentialsSecretName"}},
		{name: "no secret, allowlist without the flag", p: listOnly, d: s3("shared", ""), refusalHas: []string{"--" + AllowAmbientFlag}},
		{name: "no secret, on", p: on, d: s3("b", ""), ambient: true, notRefusing: true},
		{name: "no secret, listed bucket", p: listed, d: s3("ops", ""), ambient: true, notRefusing: true},
		{name: "no secret, bucket not listed", p: listed, d: s3("tenant-b", ""), refusalHas: []string{`"tenant-b"`, "--" + AmbientBucketsFlag}},
		{name: "no secret, listing is exact", p: listed, d: s3("shared-2", ""), refusalHas: []string{"--" + AmbientBucketsFlag}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.p.Decide(c.d)
			if got.Ambient != c.ambient {
				t.Errorf("Ambient = %v, want %v", got.Ambient, c.ambient)
			}
			if got.Refused() == c.notRefusing {
				t.Fatalf("Refused() = %v (%q), want %v", got.Refused(), got.Refusal, !c.notRefusing)
			}
			for _, s := range c.refusalHas {
				if !strings.Contains(got.Refusal, s) {
					t.Errorf("refusal %q does not mention %q", got.Refusal, s)
				}
			}
			if got.Refused() && got.Ambient {
				t.Error("a refusal grants no ambient credentials")
			}
		})
	}
}

func TestParseBuckets(t *testing.T) {
	for in, want := range map[string][]string{
		"":               nil,
		" , ":            nil,
		"a":              {"a"},
		" a , b ,, c ":   {"a", "b", "c"},
		"backups-prod,x": {"backups-prod", "x"},
	} {
		if got := ParseBuckets(in); !slices.Equal(got, want) {
			t.Errorf("ParseBuckets(%q) = %q, want %q", in, got, want)
		}
	}
}
