package recovery

import (
	"time"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
)

// KeyCheck is what the Job that checks a recovery's key found. The Job
// runs the agent's inspect with the key mounted, the very check the
// EtcdCluster restore's check Job runs (backup.CheckKey of the named key's
// fingerprint against the metadata's, then the snapshot's age header
// opened with it), so a recovery and a restore refuse the same keys.
type KeyCheck struct {
	// Snapshot is the EtcdSnapshot checked: a result for another snapshot
	// says nothing of the one chosen now.
	Snapshot string
	// Code is the agent's result code, its verdict; empty while there is
	// none.
	Code backup.Code
	// Message is the agent's.
	Message string
	// NotRun says why the agent has given no verdict although the check
	// cannot go on as it is: its Pod cannot be scheduled or started, or its
	// Job ended without the agent writing a result. Empty when Code is
	// set, and while the check simply runs.
	NotRun string
	// RetryAt is when the next check Job starts, once the Job that could
	// not run is gone; zero while that Job is still there and may yet run.
	RetryAt time.Time
}

// checkKey is the guard of an encrypted snapshot: a key must be named, and
// the check Job must have found it is the snapshot's.
func checkKey(snapshot string, named *v1alpha1.SnapshotEncryption, check *KeyCheck) *Refusal {
	switch {
	case named == nil:
		return refuse(v1alpha1.SnapshotEncryptedReason,
			"EtcdSnapshot %s is encrypted and source.snapshot.encryption names no key: name the Secret key that holds its age identity (AGE-SECRET-KEY-1…), or pick an unencrypted snapshot", snapshot)
	case check != nil && check.Snapshot == snapshot && check.Code == "" && check.NotRun != "":
		// Not the key's fault nor the snapshot's: wait for the next check.
		r := refuse(v1alpha1.RecoveryKeyCheckNotRunReason,
			"EtcdSnapshot %s is encrypted and the check of the key in Secret %s (key %s) gave no verdict, which says nothing of the key or the snapshot: %s. Nothing was changed; %s",
			snapshot, named.SecretRef.Name, named.SecretRef.Key, check.NotRun, retryWords(check.RetryAt))
		r.Waiting, r.CheckKeyOf = true, snapshot
		return r
	case check == nil || check.Snapshot != snapshot || check.Code == "":
		r := refuse(v1alpha1.RecoveryKeyCheckingReason,
			"EtcdSnapshot %s is encrypted: checking the key in Secret %s (key %s) against it before anything is changed",
			snapshot, named.SecretRef.Name, named.SecretRef.Key)
		r.Waiting, r.CheckKeyOf = true, snapshot
		return r
	case check.Code == backup.CodeOK:
		return nil
	}
	return refuse(KeyReason(check.Code), "EtcdSnapshot %s cannot be recovered with the key in Secret %s (key %s): %s. Nothing was changed",
		snapshot, named.SecretRef.Name, named.SecretRef.Key, check.Message)
}

func retryWords(at time.Time) string {
	if at.IsZero() {
		return "its Job is kept while its Pod may still start, and the check is started again if it ends without a verdict"
	}
	return "the check is started again at " + at.UTC().Format(time.RFC3339)
}

// KeyReason is the Planned condition's reason for a key check's failure
// code, as backup.RestoreReason is the restore's.
func KeyReason(c backup.Code) string {
	switch c {
	case backup.CodeEncryptionKeyMissing:
		return v1alpha1.RecoveryKeyMissingReason
	case backup.CodeEncryptionKeyInvalid:
		return v1alpha1.RecoveryKeyInvalidReason
	case backup.CodeEncryptionKeyWrong:
		return v1alpha1.RecoveryKeyWrongReason
	}
	return v1alpha1.SnapshotUnreadableReason
}
