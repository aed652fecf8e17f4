import * as React from 'react';
import { Link } from 'react-router';
import { PageSection, Title } from '@patternfly/react-core';
import { nodeHref, Overview, useAPI } from './api';
import { Cell, HealthLabel, Loading, Table, useLVMSTranslation } from './common';

// OverviewPage (/lvms): every LVMNodeSet and LVMCluster, and every node with what differs there.
const OverviewPage: React.FC = () => {
  const { t } = useLVMSTranslation();
  const { data, error, loading } = useAPI<Overview>('/overview');
  return (
    <PageSection>
      <Title headingLevel="h1">{t('LVM Storage')}</Title>
      <Loading loading={loading} error={error} what={t('the LVMS overview')}>
        {() => <OverviewBody overview={data!} />}
      </Loading>
    </PageSection>
  );
};

const OverviewBody: React.FC<{ overview: Overview }> = ({ overview }) => {
  const { t } = useLVMSTranslation();
  if (!overview.installed) {
    return <p>{t('LVMS is not installed on this cluster: its custom resource definitions are missing.')}</p>;
  }
  return (
    <>
      <Title headingLevel="h2">{t('Node sets and clusters')}</Title>
      <Table label={t('Node sets and clusters')} head={[t('Kind'), t('Name'), t('State'), t('Ready nodes')]}>
        {overview.owners.map((o) => (
          <tr className="pf-v6-c-table__tr" key={o.ref.kind + o.ref.namespace + o.ref.name} data-owner={o.ref.name}>
            <Cell label={t('Kind')}>{o.ref.kind}</Cell>
            <Cell label={t('Name')}>{o.ref.namespace ? `${o.ref.namespace}/${o.ref.name}` : o.ref.name}</Cell>
            <Cell label={t('State')}>
              <HealthLabel health={o.health} text={o.state} /> {o.message}
            </Cell>
            <Cell label={t('Ready nodes')}>{`${o.readyNodes}/${o.desiredNodes}`}</Cell>
          </tr>
        ))}
      </Table>
      <Title headingLevel="h2">{t('Nodes')}</Title>
      <Table label={t('Nodes')} head={[t('Node'), t('State'), t('Volume groups'), t('Devices in use'), t('Excluded'), t('Differences')]}>
        {overview.nodes.map((n) => (
          <tr className="pf-v6-c-table__tr" key={n.name} data-node={n.name}>
            <Cell label={t('Node')}>
              <Link to={nodeHref(n.name)}>{n.name}</Link>
            </Cell>
            <Cell label={t('State')}>
              <HealthLabel health={n.health} text={n.state} /> {n.message}
            </Cell>
            <Cell label={t('Volume groups')}>{n.volumeGroups}</Cell>
            <Cell label={t('Devices in use')}>{n.devicesInUse}</Cell>
            <Cell label={t('Excluded')}>{n.excluded}</Cell>
            <Cell label={t('Differences')}>{n.differences}</Cell>
          </tr>
        ))}
      </Table>
    </>
  );
};

export default OverviewPage;
