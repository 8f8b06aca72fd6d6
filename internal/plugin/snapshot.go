package plugin

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

const etcdSnapshotResource = "etcdsnapshots.etcd.quorumctl.io"

// DefaultSnapshotTimeout bounds snapshot --wait: a snapshot waits its turn
// behind others of the cluster, then streams the database.
const DefaultSnapshotTimeout = 30 * time.Minute

// snapshotOptions are the flags of kubectl etcd snapshot.
type snapshotOptions struct {
	to, name                     string
	endpoint, region, credential string
	caConfigMap                  string
	pathStyle, insecure          bool
}

// parseDestination reads --to: s3://BUCKET[/PREFIX] (with --s3-* flags for
// the rest of the S3 settings) or pvc://CLAIM[/PATH].
func parseDestination(o snapshotOptions) (v1alpha1.SnapshotDestination, error) {
	u, err := url.Parse(o.to)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return v1alpha1.SnapshotDestination{}, usagef("--to %q is not s3://BUCKET[/PREFIX] or pvc://CLAIM[/PATH]", o.to)
	}
	if u.User != nil {
		// It would be written into the EtcdSnapshot for anyone who may read
		// it, and no S3 client reads credentials from there anyway.
		return v1alpha1.SnapshotDestination{}, usagef("--to must not carry credentials (user:password@); put them in a Secret and name it with --s3-credentials-secret")
	}
	rest := strings.Trim(u.Path, "/")
	switch u.Scheme {
	case "s3":
		if err := checkEndpoint(o); err != nil {
			return v1alpha1.SnapshotDestination{}, err
		}
		prefix := rest
		if prefix != "" {
			prefix += "/"
		}
		d := &v1alpha1.S3Destination{Endpoint: o.endpoint, Bucket: u.Host, Prefix: prefix, Region: o.region,
			ForcePathStyle: o.pathStyle, CredentialsSecretName: o.credential, Insecure: o.insecure}
		if o.caConfigMap != "" {
			d.CABundle = &v1alpha1.CABundleReference{ConfigMapName: o.caConfigMap, Key: "ca.crt"}
		}
		return v1alpha1.SnapshotDestination{S3: d}, nil
	case "pvc":
		if o.endpoint != "" || o.region != "" || o.credential != "" || o.caConfigMap != "" || o.pathStyle || o.insecure {
			return v1alpha1.SnapshotDestination{}, usagef("the --s3-* flags do not apply to a pvc:// destination")
		}
		return v1alpha1.SnapshotDestination{PersistentVolumeClaim: &v1alpha1.PVCDestination{ClaimName: u.Host, Path: rest}}, nil
	}
	return v1alpha1.SnapshotDestination{}, usagef("--to %q: the destination must start with s3:// or pvc://", o.to)
}

// checkEndpoint refuses, before anything is created, the --s3-endpoint
// values admission would refuse anyway, with the flag to use instead.
func checkEndpoint(o snapshotOptions) error {
	if o.endpoint == "" {
		if o.insecure {
			return usagef("--s3-insecure needs an http:// --s3-endpoint; AWS's default endpoint is https")
		}
		return nil
	}
	u, err := url.Parse(o.endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return usagef("--s3-endpoint %q is not an http:// or https:// URL that names a host", o.endpoint)
	}
	if u.User != nil {
		return usagef("--s3-endpoint must not carry credentials (user:password@); put them in a Secret and name it with --s3-credentials-secret")
	}
	switch {
	case u.Scheme == "http" && !o.insecure:
		return usagef("--s3-endpoint %s is plain http: the snapshot would cross the network in clear; add --s3-insecure to allow it", o.endpoint)
	case u.Scheme == "https" && o.insecure:
		return usagef("--s3-insecure only allows an http:// endpoint; it does not turn off the verification of %s (use --s3-ca-configmap for a private CA)", o.endpoint)
	}
	return nil
}

// runSnapshot creates one EtcdSnapshot and, with waitFor, follows it to the
// end; a failed snapshot is an error carrying its reason.
func runSnapshot(ctx context.Context, env *Env, w io.Writer, cluster string, o snapshotOptions, waitFor bool, timeout time.Duration, now time.Time) error {
	dest, err := parseDestination(o)
	if err != nil {
		return err
	}
	if _, err := env.getCluster(ctx, cluster); err != nil {
		return err
	}
	name := o.name
	if name == "" {
		name = fmt.Sprintf("%s-%s", cluster, now.UTC().Format("20060102-150405"))
	}
	s := &v1alpha1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: env.Namespace, Labels: map[string]string{v1alpha1.ClusterLabel: cluster}},
		Spec:       v1alpha1.EtcdSnapshotSpec{ClusterName: cluster, Destination: dest},
	}
	if err := env.Kube.Create(ctx, s); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return &plainError{msg: fmt.Sprintf("EtcdSnapshot %s already exists in namespace %s; pick another --name", name, env.Namespace), err: err}
		}
		if apierrors.IsInvalid(err) {
			return &plainError{msg: fmt.Sprintf("the API server refused EtcdSnapshot %s: %v", name, err), err: err}
		}
		return access{verb: "create", resource: etcdSnapshotResource, namespace: env.Namespace, what: "EtcdSnapshot " + name}.explain(err)
	}
	if _, err := fmt.Fprintf(w, "Created EtcdSnapshot %s of EtcdCluster %s.\n", name, cluster); err != nil {
		return err
	}
	if !waitFor {
		return nil
	}
	var last *v1alpha1.EtcdSnapshot
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		got := &v1alpha1.EtcdSnapshot{}
		if err := env.Kube.Get(ctx, client.ObjectKeyFromObject(s), got); err != nil {
			return false, access{verb: "get", resource: etcdSnapshotResource, namespace: env.Namespace, what: "EtcdSnapshot " + name}.explain(err)
		}
		last = got
		return got.Status.Phase.Terminal(), nil
	})
	if err != nil {
		why := ""
		if last != nil {
			if c := meta.FindStatusCondition(last.Status.Conditions, v1alpha1.SnapshotSucceededCondition); c != nil {
				why = fmt.Sprintf(" (it is %s: %s)", c.Reason, c.Message)
			}
		}
		return fmt.Errorf("EtcdSnapshot %s did not finish within %s%s: %w", name, timeout, why, err)
	}
	c := meta.FindStatusCondition(last.Status.Conditions, v1alpha1.SnapshotSucceededCondition)
	if last.Status.Phase == v1alpha1.SnapshotFailed {
		reason, msg := "", ""
		if c != nil {
			reason, msg = c.Reason, c.Message
		}
		return &plainError{msg: fmt.Sprintf("EtcdSnapshot %s failed: %s: %s", name, reason, msg)}
	}
	_, err = fmt.Fprintf(w, "EtcdSnapshot %s succeeded: revision %d, %s at %s, sha256 %s.\n",
		name, last.Status.Revision, humanBytes(last.Status.SizeBytes), last.Status.Location, last.Status.SHA256)
	return err
}

// SnapshotReport is one row of kubectl etcd snapshots.
type SnapshotReport struct {
	Name      string `json:"name"`
	Cluster   string `json:"cluster"`
	Schedule  string `json:"schedule,omitempty"`
	Phase     string `json:"phase"`
	Reason    string `json:"reason,omitempty"`
	Revision  int64  `json:"revision,omitempty"`
	SizeBytes int64  `json:"sizeBytes,omitempty"`
	// Compression of the stored object, as its metadata recorded it.
	Compression string `json:"compression,omitempty"`
	// Encryption and KeyFingerprint say which key a restore needs.
	Encryption     string     `json:"encryption,omitempty"`
	KeyFingerprint string     `json:"keyFingerprint,omitempty"`
	Location       string     `json:"location,omitempty"`
	SHA256         string     `json:"sha256,omitempty"`
	CompletedAt    *time.Time `json:"completedAt,omitempty"`
}

// runSnapshots lists a cluster's snapshots, newest first.
func runSnapshots(ctx context.Context, env *Env, w io.Writer, format, cluster string) error {
	var list v1alpha1.EtcdSnapshotList
	if err := env.Kube.List(ctx, &list, client.InNamespace(env.Namespace)); err != nil {
		return access{verb: "list", resource: etcdSnapshotResource, namespace: env.Namespace, what: "EtcdSnapshots"}.explain(err)
	}
	var rows []SnapshotReport
	for _, s := range list.Items {
		if s.Spec.ClusterName != cluster {
			continue
		}
		r := SnapshotReport{Name: s.Name, Cluster: cluster, Schedule: s.Labels[v1alpha1.ScheduleLabel], Phase: string(s.Status.Phase),
			Revision: s.Status.Revision, SizeBytes: s.Status.SizeBytes, Compression: string(s.Status.Compression),
			Encryption: string(s.Status.Encryption), KeyFingerprint: s.Status.KeyFingerprint,
			Location: s.Status.Location, SHA256: s.Status.SHA256}
		if r.Phase == "" {
			r.Phase = string(v1alpha1.SnapshotPending)
		}
		if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.SnapshotSucceededCondition); c != nil {
			r.Reason = c.Reason
		}
		if s.Status.CompletedAt != nil {
			t := s.Status.CompletedAt.UTC()
			r.CompletedAt = &t
		}
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Name > rows[j].Name })
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i].CompletedAt, rows[j].CompletedAt
		switch {
		case a == nil || b == nil:
			return a == nil && b != nil
		}
		return a.After(*b)
	})
	if done, err := printStructured(w, format, rows); done {
		return err
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintf(w, "No EtcdSnapshots of EtcdCluster %s in namespace %s.\n", cluster, env.Namespace)
		return err
	}
	t := newTable("NAME", "PHASE", "REASON", "REVISION", "SIZE", "COMPLETED", "LOCATION")
	for _, r := range rows {
		completed, revision, size := "-", "-", "-"
		if r.CompletedAt != nil {
			completed = r.CompletedAt.Format(time.RFC3339)
		}
		if r.Revision > 0 {
			revision = fmt.Sprint(r.Revision)
		}
		if r.SizeBytes > 0 {
			size = humanBytes(r.SizeBytes)
		}
		t.add(r.Name, r.Phase, orDash(r.Reason), revision, size, completed, orDash(r.Location))
	}
	return t.write(w)
}
