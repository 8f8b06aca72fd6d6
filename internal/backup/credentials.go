package backup

import (
	"fmt"
	"slices"
	"strings"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// Flags of the manager that set the CredentialsPolicy; named here so that
// refusals tell the administrator which one to change.
const (
	AllowAmbientFlag   = "allow-ambient-s3-credentials"
	AmbientBucketsFlag = "ambient-s3-buckets"
)

// CredentialsPolicy says which S3 destinations the operator's Pods may reach
// with ambient credentials: whatever the SDK's default chain finds where
// they run, such as the node's instance role or a web identity. Those belong
// to the platform, not to the tenant that names the bucket, so by default a
// destination must name its own credentials Secret.
type CredentialsPolicy struct {
	// AllowAmbient lets a destination without a credentials Secret use the
	// ambient chain.
	AllowAmbient bool
	// Buckets, when not empty, are the only buckets ambient credentials may
	// be used for.
	Buckets []string
}

// ParseBuckets reads a comma separated allowlist; blanks are dropped.
func ParseBuckets(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// CredentialsDecision is how a Pod may reach a destination.
type CredentialsDecision struct {
	// Refusal, when not empty, says why no Pod may reach the destination
	// at all; nothing is to be created for it.
	Refusal string
	// Ambient lets the Pod's S3 client fall back on the default chain. It
	// is only ever true for a destination that names no Secret: a named
	// Secret that is missing must fail, not quietly become the node's role.
	Ambient bool
}

// Refused reports whether the destination may not be reached.
func (d CredentialsDecision) Refused() bool { return d.Refusal != "" }

// Decide applies the policy to a destination. A claim, and S3 with a named
// Secret, need no ambient credentials and are always allowed.
func (p CredentialsPolicy) Decide(d v1alpha1.SnapshotDestination) CredentialsDecision {
	s3 := d.S3
	if s3 == nil || s3.CredentialsSecretName != "" {
		return CredentialsDecision{}
	}
	if !p.AllowAmbient {
		return CredentialsDecision{Refusal: fmt.Sprintf("the S3 destination (bucket %q) names no credentialsSecretName, and the operator "+
			"does not let its Pods use ambient cloud credentials (--%s is off); name a Secret with the keys %s and %s",
			s3.Bucket, AllowAmbientFlag, v1alpha1.S3AccessKeyIDKey, v1alpha1.S3SecretAccessKeyKey)}
	}
	if len(p.Buckets) > 0 && !slices.Contains(p.Buckets, s3.Bucket) {
		return CredentialsDecision{Refusal: fmt.Sprintf("the S3 destination names no credentialsSecretName, and bucket %q is not one "+
			"the operator may reach with ambient credentials (--%s); name a Secret with the keys %s and %s",
			s3.Bucket, AmbientBucketsFlag, v1alpha1.S3AccessKeyIDKey, v1alpha1.S3SecretAccessKeyKey)}
	}
	return CredentialsDecision{Ambient: true}
}
