package localcluster

// The local cluster's StorageClasses, both served by the local-path
// provisioner into the same directory on each node.
const (
	// DefaultStorageClass is the default class.
	DefaultStorageClass = "local-path"
	// SecondStorageClass is a second class, for tests that move volumes
	// from one class to another. Neither allows volume expansion, which
	// the provisioner does not do.
	SecondStorageClass = "local-path-b"
)
