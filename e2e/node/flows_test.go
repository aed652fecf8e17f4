package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/lvms-dev/lvms/nodevm"
)

// nodeSet gives every node a thick VG on its first disk (xfs), a thin pool on its second (ext4) and a thick
// VG on its third (btrfs).
const nodeSet = `apiVersion: lvm.topolvm.io/v2alpha1
kind: LVMNodeSet
metadata:
  name: e2e
  namespace: lvms-system
spec:
  template:
    volumeGroups:
      - name: thick
        deviceSelector:
          deviceSelectorTerms:
            - matchExpressions:
                - {key: kname, operator: In, values: [/dev/vda]}
      - name: thin
        deviceSelector:
          deviceSelectorTerms:
            - matchExpressions:
                - {key: kname, operator: In, values: [/dev/vdb]}
      - name: fs
        deviceSelector:
          deviceSelectorTerms:
            - matchExpressions:
                - {key: kname, operator: In, values: [/dev/vdc]}
    deviceClasses:
      - name: thick
        strategy: Thick
        volumeGroup: thick
        default: true
        fstype: xfs
      - name: btrfs
        strategy: Thick
        volumeGroup: fs
        fstype: btrfs
      - name: thin
        strategy: Thin
        volumeGroup: thin
        fstype: ext4
        thin:
          poolName: pool
          sizePercent: 90
          overprovisionRatio: 5
`

// statefulSet writes 32 MiB of random data to a volume of each class (xfs, ext4, btrfs) once, keeps its
// checksum beside it, and on every start prints whether the data still matches.
var statefulSet = dataStatefulSet("thick", "thin", "btrfs")

// dataStatefulSet is the StatefulSet "data" with a 256Mi volume of class lvms-<v> mounted at /<v> for each v.
func dataStatefulSet(volumes ...string) string {
	var mounts, claims string
	for _, v := range volumes {
		mounts += "            - {name: " + v + ", mountPath: /" + v + "}\n"
		claims += `    - metadata: {name: ` + v + `}
      spec:
        accessModes: [ReadWriteOnce]
        storageClassName: lvms-` + v + `
        resources: {requests: {storage: 256Mi}}
`
	}
	return `apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: data
  namespace: default
spec:
  serviceName: data
  replicas: 1
  selector:
    matchLabels: {app: data}
  template:
    metadata:
      labels: {app: data}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: data
          image: ` + nodevm.BusyboxImage + `
          command:
            - sh
            - -c
            - |
              for d in /` + strings.Join(volumes, " /") + `; do
                cd $d
                if [ ! -f sum ]; then
                  dd if=/dev/urandom of=blob bs=1M count=32 2>/dev/null && sha256sum blob > sum && sync
                fi
                sha256sum -c sum >/dev/null && echo "$d intact $(cut -c1-16 sum)" || echo "$d CORRUPT"
              done
              echo started
              exec sleep 100000
          volumeMounts:
` + mounts + `  volumeClaimTemplates:
` + claims
}

// copies are a snapshot of the StatefulSet's thin volume restored into a new PVC, a clone of that volume, and
// a pod that checks the data of both against the checksum that came with it.
const copies = `apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: thin-snap, namespace: default}
spec:
  volumeSnapshotClassName: lvms-thin
  source: {persistentVolumeClaimName: thin-data-0}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: restored, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: lvms-thin
  resources: {requests: {storage: 512Mi}}
  dataSource: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: thin-snap}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: cloned, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: lvms-thin
  resources: {requests: {storage: 512Mi}}
  dataSource: {kind: PersistentVolumeClaim, name: thin-data-0}
---
apiVersion: v1
kind: Pod
metadata: {name: copies, namespace: default}
spec:
  restartPolicy: Never
  containers:
    - name: check
      image: ` + nodevm.BusyboxImage + `
      command: [sh, -c, 'for d in /restored /cloned; do cd $d && sha256sum -c sum >/dev/null && echo "$d intact $(cut -c1-16 sum)" || echo "$d CORRUPT"; done']
      volumeMounts:
        - {name: restored, mountPath: /restored}
        - {name: cloned, mountPath: /cloned}
  volumes:
    - {name: restored, persistentVolumeClaim: {claimName: restored}}
    - {name: cloned, persistentVolumeClaim: {claimName: cloned}}
`

// rawBlock is a pod on the raw block claim: it prints the checksum of the device's first 16 MiB, after
// filling them with random data when write is set.
func rawBlock(pod string, write bool) string {
	script := `dd if=/dev/xvda bs=1M count=16 2>/dev/null | sha256sum | cut -c1-16 | sed 's/^/block /'`
	if write {
		script = `dd if=/dev/urandom of=/dev/xvda bs=1M count=16 2>/dev/null && sync && ` + script
	}
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + pod + `, namespace: default}
spec:
  restartPolicy: Never
  containers:
    - name: block
      image: ` + nodevm.BusyboxImage + `
      command: [sh, -c, "` + script + `"]
      volumeDevices:
        - {name: raw, devicePath: /dev/xvda}
  volumes:
    - {name: raw, persistentVolumeClaim: {claimName: raw}}
`
}

// rawClaim is a raw block claim on the thick class.
const rawClaim = `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: raw, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  volumeMode: Block
  storageClassName: lvms-thick
  resources: {requests: {storage: 64Mi}}
`

// apply applies a manifest with kubectl.
func (tr *Tier) apply(t *testing.T, manifest string) {
	t.Helper()
	out, err := tr.KubectlIn(manifest, "apply", "-f", "-")
	if err != nil {
		t.Fatalf("kubectl apply: %v\n%s\n%s", err, out, manifest)
	}
}

// podLog waits until the pod's log contains want and returns the log.
func (tr *Tier) podLog(t *testing.T, ns, pod, want string) string {
	t.Helper()
	var out string
	err := poll(10*time.Minute, func() bool {
		var err error
		out, err = tr.Kubectl("-n", ns, "logs", pod)
		return err == nil && strings.Contains(out, want)
	})
	if err != nil {
		desc, _ := tr.Kubectl("-n", ns, "describe", "pod", pod)
		t.Fatalf("pod %s/%s never logged %q: %v\nlog:\n%s\n%s", ns, pod, want, err, out, desc)
	}
	return out
}

// checksums picks the "intact <sum>" lines of the StatefulSet's log, want of them; it fails on CORRUPT.
func checksums(t *testing.T, log string, want int) []string {
	t.Helper()
	var sums []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "CORRUPT") {
			t.Fatalf("data corrupt: %s", log)
		}
		if strings.Contains(line, " intact ") {
			sums = append(sums, line)
		}
	}
	if len(sums) != want {
		t.Fatalf("want a checksum line per volume, got %q", log)
	}
	return sums
}

// poll calls ok every 3 seconds until it is true or timeout passes.
func poll(timeout time.Duration, ok func() bool) error {
	return wait.PollUntilContextTimeout(context.Background(), 3*time.Second, timeout, true,
		func(context.Context) (bool, error) { return ok(), nil })
}

// holdAfterLVCreate arms a one-shot trap on the node: the next successful lvcreate, by whoever runs the
// node's lvm (the agent does, through nsenter), signals "lvcreate-held" with its arguments and then hangs
// instead of returning, so that the test can kill the agent exactly between lvcreate and its status write.
// The node's lvm binary is replaced by a wrapper through a bind mount that releaseLVCreate undoes.
const holdAfterLVCreate = `set -e
d=/run/lvms-e2e; mkdir -p $d
mkdir -p $d/real; cp /usr/sbin/lvm $d/real/lvm
cat > $d/lvm <<WRAPPER
#!/bin/sh
# lvm reads its command from argv[0] unless it is called lvm: called through a symlink (lvs, lvcreate), say it.
cmd=\$(basename "\$0"); [ "\$cmd" = lvm ] || set -- "\$cmd" "\$@"
$d/real/lvm "\$@"; rc=\$?
if [ "\$1" = lvcreate ] && [ \$rc = 0 ] && rm $d/hold 2>/dev/null; then
  # Written whole, then renamed: the test waits for the name and reads the arguments at once.
  echo "\$*" > $LVMS_VM_SHARED/.lvcreate-held && mv $LVMS_VM_SHARED/.lvcreate-held $LVMS_VM_SHARED/lvcreate-held
  exec sleep 3600
fi
exit \$rc
WRAPPER
chmod 755 $d/lvm; touch $d/hold
mount --bind $d/lvm /usr/sbin/lvm
`

// releaseLVCreate removes the trap and ends a held lvcreate's wait. The wrapper is unmounted lazily: a
// wrapper still running (the restarted agent's lvm calls) holds its script open, and a plain umount then fails
// and left the wrapper in place for every later lvm command on the node.
const releaseLVCreate = `d=/run/lvms-e2e; rm -f $d/hold
pkill -KILL -f '^sleep 3600$' || true
for i in 1 2 3; do grep -q ' /usr/sbin/lvm ' /proc/self/mountinfo || exit 0; umount -l /usr/sbin/lvm; done
! grep ' /usr/sbin/lvm ' /proc/self/mountinfo`

// crashClaim is a claim on the thick class and a pod that writes to it.
const crashClaim = `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: crash, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: lvms-thick
  resources: {requests: {storage: 64Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: crash, namespace: default}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
    - name: write
      image: ` + nodevm.BusyboxImage + `
      command: [sh, -c, 'echo data > /data/file && sync && echo written && exec sleep 100000']
      volumeMounts:
        - {name: data, mountPath: /data}
  volumes:
    - {name: data, persistentVolumeClaim: {claimName: crash}}
`

// logStorageCommands makes the node log every lvm and wipefs call, whoever makes it (the agent does, through
// nsenter), to /run/lvms-e2e/commands.log: wrappers bind-mounted over the binaries, undone by
// unlogStorageCommands.
const logStorageCommands = `set -e
d=/run/lvms-e2e; mkdir -p $d/real
for b in lvm wipefs; do
  cp /usr/sbin/$b $d/real/$b # lvm reads its command from argv[0] unless it is called lvm
  printf '#!/bin/sh\necho "%s $*" >> %s/commands.log\nexec %s/real/%s "$@"\n' $b $d $d $b > $d/$b
  chmod 755 $d/$b
  mount --bind $d/$b /usr/sbin/$b
done
`

const unlogStorageCommands = `umount /usr/sbin/lvm /usr/sbin/wipefs; cat /run/lvms-e2e/commands.log`

// growOnline asks for claim to grow to size and waits until the file system at path inside pod has grown
// by at least growKiB.
func (tr *Tier) growOnline(t *testing.T, pod, path, claim, size string, growKiB int64) {
	t.Helper()
	before := dfKiB(t, tr, pod, path)
	tr.kubectlOK(t, "patch", "pvc", claim, "--type=merge", "-p", `{"spec":{"resources":{"requests":{"storage":"`+size+`"}}}}`)
	var after int64
	if err := poll(10*time.Minute, func() bool {
		after = dfKiB(t, tr, pod, path)
		return after > before+growKiB
	}); err != nil {
		pvc, _ := tr.Kubectl("get", "pvc", claim, "-o", "yaml")
		t.Fatalf("%s's file system did not grow (%d KiB, then %d KiB): %v\n%s", claim, before, after, err, pvc)
	}
}
