package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/setup"
	"github.com/quorumctl/etcd-operator/test/chaos"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// memorySize is the tmpfs of a Memory cluster's members: the smallest size
// allowed, so that the disk fill reaches ENOSPC in seconds.
const memorySize = "256Mi"

// victim is a member hit by a fault, as it was just before.
type victim struct {
	fault    *chaos.FaultRecord
	recovery chaos.Recovery
	before   chaos.MemberState
}

// pickVictim chooses the member a fault hits.
func (r *run) pickVictim(ctx context.Context, f chaos.Fault, taken map[string]bool) (string, error) {
	members, err := r.members(ctx, f.Cluster)
	if err != nil {
		return "", err
	}
	avoidSeed := r.scheds[f.Cluster].SeedWipePending()
	name, ok := chaos.PickOne(chaos.Candidates(f.Kind, members, avoidSeed, taken), f.Pick)
	if !ok {
		return "", nil
	}
	taken[name] = true
	return name, nil
}

// runStep runs one cluster step under a workload of its own.
func (r *run) runStep(ctx context.Context, step chaos.Step, sched *chaos.LaneScheduler) error {
	stepName := fmt.Sprintf("%s#%d", step.Cluster, step.Index)
	return r.withEpochs(ctx, []string{step.Cluster}, func() error {
		if k := step.Faults[0].Kind; k.IsOperation() {
			return r.operation(ctx, step, stepName)
		}
		taken := map[string]bool{}
		var victims []victim
		var mu sync.Mutex
		var wg sync.WaitGroup
		var errs []error
		for _, f := range step.Faults {
			name, err := r.pickVictim(ctx, f, taken)
			if err != nil {
				return err
			}
			if name == "" {
				r.cfg.Logf("chaos: %s: no member can take %s now; skipped", stepName, f.Kind)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, err := r.memberFault(ctx, f, name, stepName)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				}
				if v != nil {
					victims = append(victims, *v)
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		return r.recovered(ctx, step.Cluster, victims, false)
	})
}

// memberFault waits the fault's delay, then injects it into the member.
func (r *run) memberFault(ctx context.Context, f chaos.Fault, name, step string) (*victim, error) {
	if !r.pause(ctx, f.Delay) {
		return nil, nil
	}
	before, err := r.memberState(ctx, name)
	if err != nil {
		return nil, err
	}
	rec := &chaos.FaultRecord{Kind: f.Kind, Cluster: f.Cluster, Victim: name, Step: step, Injected: time.Now()}
	if err := r.inject(ctx, f, name, rec); err != nil {
		return nil, fmt.Errorf("failed to inject %s into %s: %w", f.Kind, name, err)
	}
	return &victim{fault: rec, recovery: chaos.RecoveryOf(f.Kind), before: before}, nil
}

// inject carries out one member fault; what it measured of the fault goes
// into the record's note.
func (r *run) inject(ctx context.Context, f chaos.Fault, name string, rec *chaos.FaultRecord) error {
	ns := r.cfg.Namespace
	switch f.Kind {
	case chaos.Kill:
		return r.env.KillEtcd(ctx, ns, name)
	case chaos.DeletePod:
		return client.IgnoreNotFound(r.env.Clientset.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}))
	case chaos.WipeSeed, chaos.WipeMember:
		return r.env.LoseDataDir(ctx, ns, name)
	case chaos.DeletePVC:
		return r.deletePVC(ctx, name, rec)
	case chaos.Corrupt:
		if err := r.env.CorruptDataDir(ctx, ns, name); err != nil {
			return err
		}
		return r.env.RestartEtcd(ctx, ns, name)
	case chaos.Partition:
		return r.partition(ctx, name, f.Hold)
	case chaos.PauseLeader, chaos.PauseFollower:
		p, err := r.env.PauseMember(ctx, ns, name, f.Hold)
		if err == nil {
			rec.Note = fmt.Sprintf("etcd stopped for %s", p.Resumed.Sub(p.Stopped).Round(100*time.Millisecond))
		}
		return err
	case chaos.PeerLoss:
		rec.Note = fmt.Sprintf("%d%% of peer packets dropped for %s", f.Percent, f.Hold.Round(100*time.Millisecond))
		return r.peerLoss(ctx, name, f.Hold, f.Percent)
	case chaos.PeerLatency:
		return r.peerLatency(ctx, name, f, rec)
	case chaos.SlowDisk:
		return r.slowDisk(ctx, name, f, rec)
	case chaos.DiskFill:
		return r.fillDisk(ctx, name)
	}
	return fmt.Errorf("%s is not a member fault", f.Kind)
}

// fillDisk writes zeros into the member's tmpfs until it is full and checks
// that it is.
func (r *run) fillDisk(ctx context.Context, name string) error {
	script := `dd if=/dev/zero of=/var/lib/etcd/fill bs=1M 2>/dev/null
test "$(df -P /var/lib/etcd | awk 'NR==2 {print $4}')" -lt 1024`
	code, err := r.env.RunEphemeral(ctx, r.cfg.Namespace, name, script)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("the tmpfs of %s is not full (exit %d)", name, code)
	}
	return nil
}

// operation changes the cluster and crashes the operator's leader at the
// drawn moment of the change.
func (r *run) operation(ctx context.Context, step chaos.Step, stepName string) error {
	f := step.Faults[0]
	rec := &chaos.FaultRecord{Kind: f.Kind, Cluster: f.Cluster, Step: stepName, Injected: time.Now()}
	var victims []victim
	switch f.Kind {
	case chaos.CrashScaleUp, chaos.CrashScaleDown:
		rec.Victim = fmt.Sprintf("%d -> %d members", step.Replicas, step.ReplicasAfter)
		if err := r.patchCluster(ctx, f.Cluster, func(cl *v1alpha1.EtcdCluster) { cl.Spec.Replicas = ptr.To(step.ReplicasAfter) }); err != nil {
			return err
		}
	case chaos.CrashReplace:
		name, err := r.pickVictim(ctx, f, map[string]bool{})
		if err != nil || name == "" {
			return err
		}
		before, err := r.memberState(ctx, name)
		if err != nil {
			return err
		}
		rec.Victim = name
		if err := r.c.Delete(ctx, &v1alpha1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Namespace: r.cfg.Namespace, Name: name}}); err != nil {
			return fmt.Errorf("failed to delete EtcdMember %s: %w", name, err)
		}
		victims = append(victims, victim{fault: rec, recovery: chaos.RecoverReplaced, before: before})
	case chaos.CrashRollout:
		rec.Victim = "member template"
		if err := r.patchCluster(ctx, f.Cluster, toggleResources); err != nil {
			return err
		}
	}
	if !r.pause(ctx, f.CrashAfter) {
		return nil
	}
	leader, err := r.crashOperator(ctx)
	if err != nil {
		return err
	}
	rec.Note = fmt.Sprintf("operator leader %s killed %s in", leader, f.CrashAfter.Round(100*time.Millisecond))
	if len(victims) == 0 {
		victims = append(victims, victim{fault: rec})
	}
	return r.recovered(ctx, f.Cluster, victims, f.Kind == chaos.CrashRollout)
}

// toggleResources changes the members' memory request between two values,
// a change of the member template that rolls every member.
func toggleResources(cl *v1alpha1.EtcdCluster) {
	q := resource.MustParse("100Mi")
	if cl.Spec.Resources != nil {
		if cur, ok := cl.Spec.Resources.Requests[corev1.ResourceMemory]; ok && cur.Cmp(q) == 0 {
			q = resource.MustParse("96Mi")
		}
	}
	cl.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: q}}
}

func (r *run) patchCluster(ctx context.Context, name string, change func(*v1alpha1.EtcdCluster)) error {
	cl, err := r.getCluster(ctx, name)
	if err != nil {
		return err
	}
	patch := client.MergeFrom(cl.DeepCopy())
	change(cl)
	if err := r.c.Patch(ctx, cl, patch); err != nil {
		return fmt.Errorf("failed to change cluster %s: %w", name, err)
	}
	return nil
}

// crashOperator kills the Pod holding the operator's leader Lease without a
// grace period: the leader dies mid-reconcile and another replica, or the
// re-created Pod, takes over once the Lease expires.
func (r *run) crashOperator(ctx context.Context) (string, error) {
	// Right after an earlier crash the Lease may have no live holder yet:
	// the crash waits for the next leader, as a crash of a running one.
	var pod string
	err := framework.WaitFor(ctx, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		lease, err := r.env.Clientset.CoordinationV1().Leases(framework.OperatorNamespace()).Get(ctx, setup.LeaderElectionID, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return false, nil
		}
		pod, _, _ = strings.Cut(*lease.Spec.HolderIdentity, "_")
		p, err := r.env.Clientset.CoreV1().Pods(framework.OperatorNamespace()).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return p.DeletionTimestamp == nil && framework.PodReady(p), nil
	})
	if err != nil {
		return "", fmt.Errorf("failed to find the operator's leader: %w", err)
	}
	err = r.env.Clientset.CoreV1().Pods(framework.OperatorNamespace()).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	if err != nil {
		return "", fmt.Errorf("failed to kill the operator's leader %s: %w", pod, err)
	}
	return pod, nil
}

// recovered waits until every victim has recovered as its fault requires
// and the cluster is Ready with its size and every invariant holds, then
// sets each fault's time to Ready and records it. A victim that comes back
// as it must not, or a cluster that does not recover in time, is a
// violation.
func (r *run) recovered(ctx context.Context, cluster string, victims []victim, rollout bool) error {
	if err := r.waitRecovered(ctx, cluster, victims, rollout); err != nil {
		return err
	}
	now := time.Now()
	seen := map[*chaos.FaultRecord]bool{}
	for _, v := range victims {
		if seen[v.fault] {
			continue
		}
		seen[v.fault] = true
		v.fault.ToReady = chaos.Seconds(now.Sub(v.fault.Injected))
		r.record(*v.fault)
	}
	return nil
}

// waitRecovered is the wait of recovered, without the records.
func (r *run) waitRecovered(ctx context.Context, cluster string, victims []victim, rollout bool) error {
	healed := map[int]bool{}
	var last []chaos.Violation
	var fatal *chaos.Violation
	err := framework.WaitFor(ctx, r.cfg.RecoveryTimeout, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		last = nil
		for i, v := range victims {
			if healed[i] || v.before.Name == "" {
				continue
			}
			now, err := r.memberState(ctx, v.before.Name)
			if err != nil {
				return false, err
			}
			ok, bad := chaos.Healed(v.recovery, v.before, now)
			if bad != nil {
				fatal = bad
				return true, nil
			}
			if !ok {
				last = append(last, chaos.Violation{Invariant: chaos.InvRecovered, Detail: fmt.Sprintf("%s has not recovered from %s", v.before.Name, v.fault.Kind)})
				return false, nil
			}
			healed[i] = true
		}
		o, err := r.observe(ctx, cluster)
		if err != nil {
			return false, err
		}
		last = chaos.CheckInvariants(o)
		if want := o.Cluster.DesiredReplicas(); rollout && o.Cluster.Status.UpdatedMembers != want {
			last = append(last, chaos.Violation{Invariant: chaos.InvRecovered, Detail: fmt.Sprintf("%d of %d members on the new template", o.Cluster.Status.UpdatedMembers, want)})
		}
		return len(last) == 0, nil
	})
	if fatal != nil {
		return r.violation(*fatal)
	}
	if err != nil {
		if len(last) == 0 {
			last = []chaos.Violation{{Invariant: chaos.InvRecovered, Detail: err.Error()}}
		}
		for _, v := range last[1:] {
			r.mu.Lock()
			r.report.InvariantViolations = append(r.report.InvariantViolations, v)
			r.mu.Unlock()
		}
		return fmt.Errorf("%s did not recover within %s: %w", cluster, r.cfg.RecoveryTimeout, r.violation(last[0]))
	}
	return r.checkLossReplaced(ctx, victims)
}
