package setup

import (
	"errors"
	"fmt"
	"strings"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	etcdv1alpha1 "github.com/quorumctl/etcd-operator/api/v1alpha1"
)

const (
	// DefaultEtcdImageRepository is where etcd images come from when neither
	// --etcd-image-repository nor ETCD_IMAGE_REPOSITORY says otherwise. It
	// matches ETCD_IMAGE_REPOSITORY in versions.env, under which the local
	// cluster tags its etcd images.
	DefaultEtcdImageRepository = "gcr.io/etcd-development/etcd"

	// LeaderElectionID names the Lease the manager replicas compete for.
	LeaderElectionID = "etcd-operator.etcd.quorumctl.io"

	// Environment variables read as fallbacks for the flags of the same meaning.
	EnvEtcdImageRepository = "ETCD_IMAGE_REPOSITORY"
	EnvClusterDomain       = "CLUSTER_DOMAIN"
	EnvOperatorImage       = "OPERATOR_IMAGE"
	EnvWatchNamespaces     = "WATCH_NAMESPACES"
)

// ControllerOptions is what main hands to the controllers when it registers
// them with the manager.
type ControllerOptions struct {
	// EtcdImageRepository is the repository etcd images are taken from; the
	// tag is the EtcdCluster's version.
	EtcdImageRepository string
	// ClusterDomain is the DNS suffix of the cluster (cluster.local by
	// default), used to build the stable names of etcd members.
	ClusterDomain string
	// OperatorImage is the operator's own image, for work that runs in the
	// member Pods' namespace (snapshot and restore jobs). Optional today.
	OperatorImage string
	// MaxConcurrentReconciles is how many objects of each kind are
	// reconciled at once.
	MaxConcurrentReconciles int
}

// Validate reports options the controllers cannot work with.
func (o ControllerOptions) Validate() error {
	var errs []error
	if o.MaxConcurrentReconciles < 0 {
		errs = append(errs, fmt.Errorf("--max-concurrent-reconciles must not be negative, got %d", o.MaxConcurrentReconciles))
	}
	if strings.TrimSpace(o.EtcdImageRepository) == "" {
		errs = append(errs, errors.New("the etcd image repository is empty"))
	}
	if hasTagOrDigest(o.EtcdImageRepository) {
		errs = append(errs, errors.New("the etcd image repository must not carry a tag or digest: "+o.EtcdImageRepository))
	}
	if err := validateDomain(o.ClusterDomain); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// NewScheme returns a scheme holding the built-in Kubernetes types and the
// etcd.quorumctl.io API.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(AddToScheme(s))
	return s
}

// AddToScheme registers every type the manager reads or writes.
func AddToScheme(s *runtime.Scheme) error {
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return err
	}
	// cert-manager's Certificate, for clusters whose certificates it issues;
	// nothing watches it, so the operator runs where it is not installed.
	if err := cmapi.AddToScheme(s); err != nil {
		return err
	}
	return etcdv1alpha1.AddToScheme(s)
}

// hasTagOrDigest reports whether an image reference names more than a
// repository. A colon before the last slash is a registry port, not a tag.
func hasTagOrDigest(repo string) bool {
	if strings.ContainsAny(repo, "@ ") {
		return true
	}
	return strings.Contains(repo[strings.LastIndex(repo, "/")+1:], ":")
}
