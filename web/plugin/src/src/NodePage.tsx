import * as React from 'react';
import { Link, useParams } from 'react-router';
import { PageSection, Title } from '@patternfly/react-core';
import { ClassCheck, deviceHref, NodeView, useAPI } from './api';
import { Cell, Explained, HealthLabel, Loading, Table, useLVMSTranslation } from './common';

// NodePage (/lvms/nodes/:node): desired vs actual per volume group and device, with every exclusion's reason.
const NodePage: React.FC = () => {
  const { t } = useLVMSTranslation();
  const node = useParams().node ?? '';
  const { data, error, loading } = useAPI<NodeView>(`/nodes/${encodeURIComponent(node)}`);
  return (
    <PageSection>
      <Link to="/lvms">{t('LVM Storage')}</Link>
      <Title headingLevel="h1">{t('Node {{node}}', { node })}</Title>
      <Loading loading={loading} error={error} what={t('node {{node}}', { node })}>
        {() => <NodeBody view={data!} />}
      </Loading>
    </PageSection>
  );
};

const NodeBody: React.FC<{ view: NodeView }> = ({ view }) => {
  const { t } = useLVMSTranslation();
  return (
    <>
      <p>
        <HealthLabel health={view.health} text={view.state} /> {view.message}
      </p>
      {view.volumeGroups.map((vg) => (
        <section key={vg.name} data-vg={vg.name}>
          <Title headingLevel="h2">
            {t('Volume group {{name}}', { name: vg.name })} <HealthLabel health={vg.health} text={vg.state} />
          </Title>
          <p>
            {t('Desired: {{desired}}', { desired: vg.desired })}
            {vg.size && ` · ${t('Size {{size}}', { size: vg.size.human })}`}
            {vg.free && ` · ${t('Free {{free}}', { free: vg.free.human })}`}
          </p>
          <Table label={t('Devices of {{name}}', { name: vg.name })} head={[t('Device'), t('State'), t('Desired'), t('Actual'), t('Why')]}>
            {vg.devices.map((d) => (
              <tr className="pf-v6-c-table__tr" key={d.kname} data-device={d.kname}>
                <Cell label={t('Device')}>
                  <Link to={deviceHref(view.name, d.kname)}>{d.kname}</Link>
                </Cell>
                <Cell label={t('State')}>
                  <HealthLabel health={d.health} text={d.state} />
                </Cell>
                <Cell label={t('Desired')}>{d.desired}</Cell>
                <Cell label={t('Actual')}>{d.actual}</Cell>
                <Cell label={t('Why')}>
                  {(d.reasons ?? []).map((r) => (
                    <div key={r.code} data-reason={r.code}>
                      {r.sentence}
                    </div>
                  ))}
                  <Explained explanation={d.explanation} />
                </Cell>
              </tr>
            ))}
          </Table>
        </section>
      ))}
      {(view.deviceClasses ?? []).length > 0 && (
        <section data-section="deviceclasses">
          <Title headingLevel="h2">{t('Device classes')}</Title>
          <Table label={t('Device classes')} head={[t('Device class'), t('State'), t('StorageClass'), t('VolumeSnapshotClass'), t('Capacity')]}>
            {view.deviceClasses!.map((dc) => (
              <tr className="pf-v6-c-table__tr" key={dc.name} data-deviceclass={dc.name} data-state={dc.state}>
                <Cell label={t('Device class')}>{dc.name}</Cell>
                <Cell label={t('State')}>
                  <HealthLabel health={dc.health} text={dc.state} /> {dc.message}
                </Cell>
                <Cell label={t('StorageClass')}>
                  <Check kind="StorageClass" check={dc.storageClass} />
                </Cell>
                <Cell label={t('VolumeSnapshotClass')}>
                  <Check kind="VolumeSnapshotClass" check={dc.snapshotClass} />
                </Cell>
                <Cell label={t('Capacity')}>
                  <span data-capacity="">{dc.capacity?.text}</span>
                </Cell>
              </tr>
            ))}
          </Table>
        </section>
      )}
      {(view.conditions ?? []).length > 0 && (
        <section data-section="conditions">
          <Title headingLevel="h2">{t('Conditions')}</Title>
          <Table label={t('Conditions')} head={[t('Type'), t('Status'), t('On'), t('Message')]}>
            {view.conditions!.map((c) => (
              <tr className="pf-v6-c-table__tr" key={`${c.object?.kind}/${c.type}`} data-type={c.type} data-object={c.object?.kind ?? ''}>
                <Cell label={t('Type')}>{c.type}</Cell>
                <Cell label={t('Status')}>{c.status}</Cell>
                <Cell label={t('On')}>{c.object && `${c.object.kind} ${c.object.name}`}</Cell>
                <Cell label={t('Message')}>
                  {c.message}
                  <Explained explanation={c.explanation} />
                </Cell>
              </tr>
            ))}
          </Table>
        </section>
      )}
      {(view.events ?? []).length > 0 && (
        <section data-section="events">
          <Title headingLevel="h2">{t('Events')}</Title>
          <Table label={t('Events')} head={[t('Type'), t('Reason'), t('Object'), t('Message'), t('Count')]}>
            {view.events!.map((e, i) => (
              <tr className="pf-v6-c-table__tr" key={i} data-reason={e.reason}>
                <Cell label={t('Type')}>
                  <HealthLabel health={e.health} text={e.type} />
                </Cell>
                <Cell label={t('Reason')}>{e.reason}</Cell>
                <Cell label={t('Object')}>{`${e.object.kind} ${e.object.name}`}</Cell>
                <Cell label={t('Message')}>{e.message}</Cell>
                <Cell label={t('Count')}>
                  <span data-count="">{e.count}</span>
                </Cell>
              </tr>
            ))}
          </Table>
        </section>
      )}
    </>
  );
};

// Check says what the console says of a class check: exists, missing, provisions elsewhere, or cannot be known.
const Check: React.FC<{ kind: string; check?: ClassCheck }> = ({ kind, check }) => {
  const { t } = useLVMSTranslation();
  if (!check) {
    return <>{t('none')}</>;
  }
  let word: string;
  let health: 'ok' | 'info' | 'error';
  if (check.unknown) {
    [word, health] = [t('cannot be known'), 'info'];
  } else if (!check.differs) {
    [word, health] = [t('exists'), 'ok'];
  } else if (check.inCluster) {
    [word, health] = [t('provisions elsewhere'), 'error'];
  } else {
    [word, health] = [t('missing'), 'error'];
  }
  return (
    <span data-kind={kind} data-class={check.name} data-check={word}>
      {check.name} <HealthLabel health={health} text={word} />
      {check.unknown && ` (${check.unknown})`}
      <Explained explanation={check.explanation} />
    </span>
  );
};

export default NodePage;
