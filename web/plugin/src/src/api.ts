// Data comes from the LVMS console's JSON API through the OpenShift console's plugin proxy (ConsolePlugin
// spec.proxy alias "api", authorization UserToken): the console adds the logged-in user's token, so every
// view shows what that user may read.
import * as React from 'react';
import { consoleFetchJSON } from '@openshift-console/dynamic-plugin-sdk';

export const API = '/api/proxy/plugin/lvms-console/api/api/v1';

export type Health = 'ok' | 'info' | 'warning' | 'error' | 'unknown';
export type Ref = { api: string; kind: string; namespace?: string; name: string };
export type Bytes = { bytes: number; human: string };
export type Step = { text: string; command?: string };
export type Explanation = { code: string; known: boolean; title: string; why: string; next?: Step[]; warning?: string };
export type Reason = { code: string; sentence: string; explanation: Explanation };
// Condition is a status condition; on a node, object is the object that carries it (its LVMNode or a v1
// LVMVolumeGroupNodeStatus).
export type Condition = { type: string; status: string; reason?: string; message?: string; object?: Ref; explanation?: Explanation };

export type OwnerSummary = { ref: Ref; state: string; message?: string; desiredNodes: number; readyNodes: number; health: Health; conditions?: Condition[] };
export type NodeSummary = {
  name: string; state: string; message?: string; health: Health; owners: Ref[];
  volumeGroups: number; devicesInUse: number; excluded: number; missing: number; differences: number;
};
export type Overview = { cluster?: string; installed: boolean; owners: OwnerSummary[]; nodes: NodeSummary[] };

export type DeviceRow = {
  kname: string; path?: string; state: string; desired: string; actual: string; size?: Bytes;
  reasons?: Reason[]; differs: boolean; health: Health; explanation?: Explanation;
};
export type VolumeGroupView = {
  name: string; source: Ref; desired: string; state: string; message?: string; size?: Bytes; free?: Bytes;
  devices: DeviceRow[]; health: Health;
};
// ClassCheck is a StorageClass or VolumeSnapshotClass a device class should have, against the cluster.
export type ClassCheck = { name: string; inCluster: boolean; unknown?: string; matches: boolean; differs: boolean; explanation?: Explanation };
// Capacity's text is the console's own sentence for it (free, not usable and why, provisioned).
export type Capacity = { deviceClass: string; node?: string; free: Bytes; unusable?: Bytes; unusableReason?: string; text: string };
export type NodeDeviceClass = {
  name: string; source: Ref; volumeGroup: string; strategy: string; state: string; message?: string;
  storageClass?: ClassCheck; snapshotClass?: ClassCheck; capacity?: Capacity; health: Health;
};
export type EventView = { time: string; type: string; reason: string; object: Ref; message: string; count: number; health: Health };
export type NodeView = {
  name: string; state: string; message?: string; health: Health; owners: Ref[]; volumeGroups: VolumeGroupView[];
  deviceClasses?: NodeDeviceClass[]; conditions?: Condition[]; events?: EventView[];
};
export type Verdict = { code: string; filter: string; outcome: string; sentence?: string };
export type DeviceEntry = { volumeGroup: string; source: Ref; row: DeviceRow; verdicts: Verdict[] };
export type DeviceView = { node: string; kname: string; entries: DeviceEntry[]; health: Health };

// LoadError is what a page shows when the API refused or failed.
export type LoadError = { status?: number; message: string };

const statusOf = (err: any): number | undefined => err?.response?.status ?? err?.status ?? err?.code;

// useAPI fetches path (below /api/v1) and refetches when it changes.
export const useAPI = <T,>(path: string): { data?: T; error?: LoadError; loading: boolean } => {
  const [state, setState] = React.useState<{ data?: T; error?: LoadError; loading: boolean }>({ loading: true });
  React.useEffect(() => {
    let live = true;
    setState({ loading: true });
    consoleFetchJSON(API + path)
      .then((data: T) => live && setState({ data, loading: false }))
      .catch((err: any) => live && setState({ error: { status: statusOf(err), message: String(err?.message ?? err) }, loading: false }));
    return () => {
      live = false;
    };
  }, [path]);
  return state;
};

// Paths of the plugin's own pages; a device's kernel name (/dev/sdb) is one encoded segment.
export const nodeHref = (node: string) => `/lvms/nodes/${encodeURIComponent(node)}`;
export const deviceHref = (node: string, kname: string) => `${nodeHref(node)}/devices/${encodeURIComponent(kname)}`;
export const deviceAPI = (node: string, kname: string) =>
  `/nodes/${encodeURIComponent(node)}/devices/${encodeURIComponent(kname)}`;
