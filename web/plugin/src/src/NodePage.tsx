import * as React from 'react';
import { Link, useParams } from 'react-router';
import { PageSection, Title } from '@patternfly/react-core';
import { deviceHref, NodeView, useAPI } from './api';
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
    </>
  );
};

export default NodePage;
