package framework

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/quorumctl/etcd-operator/test/localcluster"
)

// Faults are injected the way an operator of a real cluster could: through
// ephemeral containers running the tools image next to etcd, with the
// member's data volume mounted. They pass the restricted Pod Security level.

const (
	dataMount = "/var/lib/etcd"
	dataDir   = dataMount + "/data"
)

// RunEphemeral runs script in a new ephemeral container of the Pod and waits
// for it to finish, returning its exit code. A Pod that cannot run it (not
// scheduled, not running, being deleted, replaced or gone) fails the call at
// once with the reason, rather than after the wait: a fault that was never
// injected must not pass for one that was.
func (e *Env) RunEphemeral(ctx context.Context, ns, podName, script string) (int32, error) {
	uid, name, err := e.addEphemeral(ctx, ns, podName, "", script)
	if err != nil {
		return 0, err
	}
	var code int32
	err = WaitFor(ctx, 2*time.Minute, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		p, err := e.Clientset.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, Final(fmt.Errorf("pod %s/%s is gone; its ephemeral container %s never finished", ns, podName, name))
		}
		if err != nil {
			return false, err
		}
		if p.UID != uid {
			return false, Final(fmt.Errorf("pod %s/%s was replaced; its ephemeral container %s went with the old one", ns, podName, name))
		}
		// The container's own end first: the fault may have stopped the
		// Pod after it ran.
		for _, s := range p.Status.EphemeralContainerStatuses {
			if s.Name != name {
				continue
			}
			if t := s.State.Terminated; t != nil {
				code = t.ExitCode
				return true, nil
			}
			if w := s.State.Waiting; w != nil && ephemeralFailures[w.Reason] {
				return false, Final(fmt.Errorf("ephemeral container %s of pod %s/%s cannot start: %s: %s", name, ns, podName, w.Reason, w.Message))
			}
		}
		if err := Injectable(p); err != nil {
			return false, Final(fmt.Errorf("ephemeral container %s did not finish: %w", name, err))
		}
		return false, nil
	})
	return code, err
}

// ephemeralFailures are the kubelet's reasons for a container it will not
// start however long one waits.
var ephemeralFailures = map[string]bool{
	"ErrImageNeverPull": true, "InvalidImageName": true, "CreateContainerConfigError": true,
	"CreateContainerError": true, "RunContainerError": true, "StartError": true,
}

// Injectable says why a fault cannot be injected into the Pod, or nil: it
// must be bound to a node, running and not being deleted. A Pod that never
// ran has no container to run a fault in and no process to signal; one being
// deleted takes the fault with it.
func Injectable(p *corev1.Pod) error {
	switch {
	case p.DeletionTimestamp != nil:
		return fmt.Errorf("pod %s/%s is being deleted", p.Namespace, p.Name)
	case p.Spec.NodeName == "":
		why := "no scheduling decision yet"
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
				why = fmt.Sprintf("%s: %s", c.Reason, c.Message)
			}
		}
		return fmt.Errorf("pod %s/%s is not scheduled (%s)", p.Namespace, p.Name, why)
	case p.Status.Phase != corev1.PodRunning:
		return fmt.Errorf("pod %s/%s is not running (phase %q)", p.Namespace, p.Name, p.Status.Phase)
	}
	return nil
}

// addEphemeral adds an ephemeral container running script with the tools
// image and the member's data volume mounted, to a Pod that can run it. With
// target set, it shares that container's process namespace. It returns the
// UID of the Pod it was added to and the container's name.
func (e *Env) addEphemeral(ctx context.Context, ns, podName, target, script string) (types.UID, string, error) {
	pods := e.Clientset.CoreV1().Pods(ns)
	p, err := pods.Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return "", "", err
	}
	if err := Injectable(p); err != nil {
		return "", "", err
	}
	name := "fault-" + rand.String(5)
	no := false
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
		TargetContainerName: target,
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name:            name,
			Image:           localcluster.ToolsImage,
			ImagePullPolicy: corev1.PullNever,
			Command:         []string{"/bin/sh", "-c", script},
			VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: dataMount}},
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: &no,
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		},
	})
	if _, err := pods.UpdateEphemeralContainers(ctx, podName, p, metav1.UpdateOptions{}); err != nil {
		return "", "", fmt.Errorf("failed to add ephemeral container to %s: %w", podName, err)
	}
	return p.UID, name, nil
}

// WipeDataDir empties a member's data dir and checks that it is empty. The
// check fails closed: a data dir that cannot be listed is not reported empty.
func (e *Env) WipeDataDir(ctx context.Context, ns, podName string) error {
	script := fmt.Sprintf(`set -e
rm -rf %[1]s/member
test -d %[1]s
listing=$(ls -A %[1]s)
test -z "$listing"`, dataDir)
	code, err := e.RunEphemeral(ctx, ns, podName, script)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("wiping %s failed or left files behind (exit %d)", podName, code)
	}
	return nil
}

// CorruptDataDir damages the record every WAL segment opens with after its
// CRC record, and checks that it did. A segment begins with a 16-byte frame
// holding the CRC record, then the metadata record's 8-byte length, its type
// and CRC fields, and its data (the member's and the cluster's IDs): offset
// 40 falls in that data, so its CRC no longer matches and etcd exits at
// start with "crc mismatch" whichever segment it reads first. Damage at a
// random place does not always break anything: past a young WAL's last
// record etcd takes it for a torn write, repairs the tail and starts; a
// damaged length field can get a segment "repaired" down to nothing. The
// database is left alone: what damage there does depends on the pages it
// hits (a meta page is rewritten by the graceful stop, a damaged freelist
// makes bbolt panic), so etcd would not fail one way every time.
func (e *Env) CorruptDataDir(ctx context.Context, ns, podName string) error {
	code, err := e.RunEphemeral(ctx, ns, podName, corruptWALScript(dataDir))
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("corrupting %s failed (exit %d)", podName, code)
	}
	return nil
}

// corruptWALScript is CorruptDataDir's script for etcd's data dir dir.
func corruptWALScript(dir string) string {
	return fmt.Sprintf(`set -e
n=0
for f in %[1]s/member/wal/*.wal; do
  test -f "$f"
  printf '\336\255\276\357' | dd of="$f" bs=1 seek=40 conv=notrunc 2>/dev/null
  test "$(dd if="$f" bs=1 skip=40 count=4 2>/dev/null | od -A n -t x1 | tr -d ' \n')" = deadbeef
  n=$((n+1))
done
test "$n" -ge 1`, dir)
}

// RestartEtcd stops etcd in place; the kubelet restarts the container in
// the same Pod, whose spec cannot change. It waits until the restart shows,
// or the Pod goes (the operator may replace the member first). A container
// that already exited, as one whose data was corrupted under it can, is
// restarting anyway and is not signalled; a Pod that is not scheduled or not
// running has nothing to restart, and fails the call at once (Injectable).
func (e *Env) RestartEtcd(ctx context.Context, ns, podName string) error {
	p, err := e.Clientset.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := Injectable(p); err != nil {
		return err
	}
	before, running, err := etcdContainer(p)
	if err != nil {
		return err
	}
	if running {
		// The ephemeral container shares etcd's process namespace, where
		// etcd is PID 1 and handles SIGTERM; it dies with etcd, so its own
		// exit code says nothing and is not waited for.
		if _, _, err := e.addEphemeral(ctx, ns, podName, "etcd", "kill -TERM 1; sleep 30"); err != nil {
			return err
		}
	}
	return e.waitEtcdRestarted(ctx, p, before, !running)
}

// waitEtcdRestarted waits until the etcd container of p has restarted more
// than before times, or, with already set, until it merely has a status; a
// Pod that goes or is replaced meanwhile ends the wait too.
func (e *Env) waitEtcdRestarted(ctx context.Context, p *corev1.Pod, before int32, already bool) error {
	return WaitFor(ctx, time.Minute, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		now, err := e.Clientset.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if now.UID != p.UID || now.DeletionTimestamp != nil {
			return true, nil
		}
		n, _, err := etcdContainer(now)
		return err == nil && (n > before || already), err
	})
}

// etcdContainer reads the etcd container's restarts and whether it runs.
func etcdContainer(p *corev1.Pod) (restarts int32, running bool, err error) {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == "etcd" {
			return s.RestartCount, s.State.Running != nil, nil
		}
	}
	return 0, false, fmt.Errorf("pod %s/%s has no etcd container status", p.Namespace, p.Name)
}
