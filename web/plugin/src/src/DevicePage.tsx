import * as React from 'react';
import { Link, useParams } from 'react-router';
import { PageSection, Title } from '@patternfly/react-core';
import { deviceAPI, DeviceView, nodeHref, useAPI } from './api';
import { Cell, Explained, HealthLabel, Loading, Table, useLVMSTranslation } from './common';

// DevicePage (/lvms/nodes/:node/devices/:device): the device in every volume group that considered it, with
// every filter's verdict and the explanation of each exclusion.
const DevicePage: React.FC = () => {
  const { t } = useLVMSTranslation();
  const params = useParams();
  const node = params.node ?? '';
  const device = params.device ?? '';
  const { data, error, loading } = useAPI<DeviceView>(deviceAPI(node, device));
  return (
    <PageSection>
      <Link to={nodeHref(node)}>{t('Node {{node}}', { node })}</Link>
      <Title headingLevel="h1">{t('Device {{device}} on {{node}}', { device, node })}</Title>
      <Loading loading={loading} error={error} what={t('device {{device}}', { device })}>
        {() => (
          <>
            {data!.entries.map((e) => (
              <section key={e.volumeGroup} data-vg={e.volumeGroup}>
                <Title headingLevel="h2">
                  {t('In volume group {{name}}', { name: e.volumeGroup })} <HealthLabel health={e.row.health} text={e.row.state} />
                </Title>
                <p>{`${e.row.desired} · ${e.row.actual}`}</p>
                {(e.row.reasons ?? []).map((r) => (
                  <div key={r.code} data-reason={r.code}>
                    <p>{r.sentence}</p>
                    <Explained explanation={r.explanation} />
                  </div>
                ))}
                <Table label={t('Filters')} head={[t('Filter'), t('Outcome'), t('Why')]}>
                  {e.verdicts.map((v) => (
                    <tr className="pf-v6-c-table__tr" key={v.filter} data-filter={v.filter}>
                      <Cell label={t('Filter')}>{v.filter}</Cell>
                      <Cell label={t('Outcome')}>{v.outcome}</Cell>
                      <Cell label={t('Why')}>{v.sentence}</Cell>
                    </tr>
                  ))}
                </Table>
              </section>
            ))}
          </>
        )}
      </Loading>
    </PageSection>
  );
};

export default DevicePage;
