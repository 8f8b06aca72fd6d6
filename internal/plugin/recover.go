package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

const etcdRecoveryResource = "etcdrecoveries.etcd.quorumctl.io"

// DefaultRecoverTimeout bounds recover's wait: the survivor restarts, and
// every member that is added back copies its data as a learner.
const DefaultRecoverTimeout = 15 * time.Minute

// recoverPoll is how often recover looks at the EtcdRecovery and the
// cluster; tests shorten it.
var recoverPoll = time.Second

// recoverOptions are recover's flags.
type recoverOptions struct {
	fromSurvivor, fromSnapshot bool
	member, snapshot           string
	maxAge                     time.Duration
	// encryptionKey is SECRET/KEY: the Secret key holding the age
	// identity of an encrypted snapshot.
	encryptionKey string
	force, wait   bool
	timeout       time.Duration
}

func validateRecover(o recoverOptions) error {
	switch {
	case o.fromSurvivor == o.fromSnapshot:
		return usagef("recover needs exactly one of --from-survivor or --from-snapshot")
	case o.fromSnapshot && o.member != "":
		return usagef("recover --member names a survivor; it goes with --from-survivor")
	case o.fromSurvivor && (o.snapshot != "" || o.maxAge != 0 || o.encryptionKey != ""):
		return usagef("recover --snapshot, --max-age and --encryption-key go with --from-snapshot")
	case o.encryptionKey != "" && encryptionRef(o.encryptionKey) == nil:
		return usagef("recover --encryption-key is SECRET/KEY, the Secret and the key in it that hold the snapshot's age identity")
	case o.maxAge < 0 || o.timeout <= 0:
		return usagef("recover --max-age and --recover-timeout must be positive")
	}
	return nil
}

// runRecover asks the operator for a disaster recovery by creating an
// EtcdRecovery. The operator's guards decide whether it goes ahead; the
// command prints the plan the operator recorded, or its refusal, and waits
// for the cluster to answer again and to be Ready. It never talks to etcd
// itself: a cluster without a quorum has little to say, and the operator
// asks each member on its own.
func runRecover(ctx context.Context, env *Env, w io.Writer, cluster string, o recoverOptions) error {
	c, err := env.getCluster(ctx, cluster)
	if err != nil {
		return err
	}
	er := &v1alpha1.EtcdRecovery{
		ObjectMeta: metav1.ObjectMeta{GenerateName: cluster + "-recover-", Namespace: env.Namespace, Labels: v1alpha1.ClusterLabels(cluster)},
		Spec:       v1alpha1.EtcdRecoverySpec{ClusterName: cluster, Force: o.force},
	}
	if o.fromSnapshot {
		er.Spec.Source.Snapshot = &v1alpha1.SnapshotSource{SnapshotName: o.snapshot}
		if o.maxAge > 0 {
			er.Spec.Source.Snapshot.MaxAge = &metav1.Duration{Duration: o.maxAge}
		}
		er.Spec.Source.Snapshot.Encryption = encryptionRef(o.encryptionKey)
	} else {
		er.Spec.Source.Survivor = &v1alpha1.SurvivorSource{Member: o.member}
	}
	if err := env.Kube.Create(ctx, er); err != nil {
		return access{verb: "create", resource: etcdRecoveryResource, namespace: env.Namespace, what: "an EtcdRecovery"}.explain(err)
	}
	if _, err := fmt.Fprintf(w, "Created EtcdRecovery %s for EtcdCluster %s/%s; waiting for the operator's plan.\n", er.Name, c.Namespace, c.Name); err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(er)
	deadline, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	var got *v1alpha1.EtcdRecovery
	err = poll(deadline, func(ctx context.Context) (bool, error) {
		got, err = getRecovery(ctx, env, key)
		return err == nil && got.Status.Phase != "" && got.Status.Phase != v1alpha1.RecoveryPending, err
	})
	if err != nil {
		return fmt.Errorf("the operator made no plan for EtcdRecovery %s within %s (is it running? kubectl describe etcdrecovery %s): %w", er.Name, o.timeout, er.Name, err)
	}
	if got.Status.Phase == v1alpha1.RecoveryRefused {
		cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.RecoveryPlannedCondition)
		if cond == nil {
			return fmt.Errorf("the operator refused EtcdRecovery %s", er.Name)
		}
		return fmt.Errorf("the operator refused EtcdRecovery %s (%s): %s", er.Name, cond.Reason, cond.Message)
	}
	if got.Status.Plan != nil {
		if err := printPlan(w, got.Status.Plan); err != nil {
			return err
		}
	}
	if !o.wait {
		_, err := fmt.Fprintf(w, "Follow it with: kubectl get etcdrecovery %s -w\n", er.Name)
		return err
	}
	return waitRecovered(deadline, env, w, key, c.Name, o.timeout)
}

// waitRecovered follows the recovery to its end, printing each step the
// operator reports, and then waits for the cluster to be Ready.
func waitRecovered(ctx context.Context, env *Env, w io.Writer, key client.ObjectKey, cluster string, timeout time.Duration) error {
	last := ""
	var got *v1alpha1.EtcdRecovery
	err := poll(ctx, func(ctx context.Context) (bool, error) {
		var err error
		if got, err = getRecovery(ctx, env, key); err != nil {
			return false, err
		}
		if cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.RecoveredCondition); cond != nil && cond.Message != last {
			last = cond.Message
			if _, err := fmt.Fprintf(w, "  %s\n", last); err != nil {
				return false, err
			}
		}
		return got.Status.Phase.Terminal(), nil
	})
	if err != nil {
		return fmt.Errorf("EtcdRecovery %s did not finish within %s (kubectl describe etcdrecovery %s says where it is): %w", key.Name, timeout, key.Name, err)
	}
	if got.Status.Phase != v1alpha1.RecoverySucceeded {
		return fmt.Errorf("EtcdRecovery %s %s: %s", key.Name, strings.ToLower(string(got.Status.Phase)), last)
	}
	var c *v1alpha1.EtcdCluster
	err = poll(ctx, func(ctx context.Context) (bool, error) {
		var err error
		if c, err = env.getCluster(ctx, cluster); err != nil {
			return false, err
		}
		ready := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ReadyCondition)
		return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == c.Generation, nil
	})
	if err != nil {
		return fmt.Errorf("EtcdCluster %s answers again but was not Ready within %s (kubectl describe etcdcluster %s says why): %w", cluster, timeout, cluster, err)
	}
	_, err = fmt.Fprintf(w, "EtcdCluster %s is Ready with %d members.\n", cluster, c.Status.ReadyMembers)
	return err
}

func getRecovery(ctx context.Context, env *Env, key client.ObjectKey) (*v1alpha1.EtcdRecovery, error) {
	er := &v1alpha1.EtcdRecovery{}
	if err := env.Kube.Get(ctx, key, er); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &plainError{msg: fmt.Sprintf("EtcdRecovery %s was deleted while waiting for it", key.Name), err: err}
		}
		return nil, access{verb: "get", resource: etcdRecoveryResource, namespace: key.Namespace, what: "EtcdRecovery " + key.Name}.explain(err)
	}
	return er, nil
}

func poll(ctx context.Context, cond func(context.Context) (bool, error)) error {
	return wait.PollUntilContextCancel(ctx, recoverPoll, true, cond)
}

// printPlan shows what the operator recorded before changing anything.
func printPlan(w io.Writer, p *v1alpha1.RecoveryPlan) error {
	var b strings.Builder
	b.WriteString("Plan, recorded before anything changes:\n")
	if p.Source == v1alpha1.RecoveryFromSnapshot {
		fmt.Fprintf(&b, "  from:      EtcdSnapshot %s, revision %d\n", p.Snapshot, p.Revision)
	} else {
		fmt.Fprintf(&b, "  from:      member %s (%s), revision %d\n", p.Survivor, p.SurvivorID, p.Revision)
	}
	if p.BestKnownMember != "" {
		fmt.Fprintf(&b, "  best:      revision %d, on %s (gap %d)\n", p.BestKnownRevision, p.BestKnownMember, p.RevisionGap)
	}
	for _, s := range p.Survivors {
		fmt.Fprintf(&b, "  survivor:  %s raft index %d, applied %d, revision %d\n", s.Name, s.RaftIndex, s.RaftAppliedIndex, s.Revision)
	}
	if len(p.Removed) > 0 {
		fmt.Fprintf(&b, "  replaces:  %s\n", strings.Join(p.Removed, ", "))
	}
	fmt.Fprintf(&b, "  keeps:     %s\n  loses:     %s\n", p.Keeps, p.Loses)
	if len(p.Forced) > 0 {
		fmt.Fprintf(&b, "  forced:    %s\n", strings.Join(p.Forced, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// encryptionRef parses SECRET/KEY; nil for "" or anything else. The API
// server's rules judge the names themselves.
func encryptionRef(v string) *v1alpha1.SnapshotEncryption {
	secret, key, ok := strings.Cut(v, "/")
	if !ok || secret == "" || key == "" || strings.Contains(key, "/") {
		return nil
	}
	return &v1alpha1.SnapshotEncryption{SecretRef: v1alpha1.SecretKeyReference{Name: secret, Key: key}}
}
