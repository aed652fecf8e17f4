import * as React from 'react';
import { Link } from 'react-router';
import { PageSection, Title } from '@patternfly/react-core';
import { nodeHref, Overview, useAPI } from './api';
import { Cell, HealthLabel, Loading, Table, useLVMSTranslation } from './common';

type Owner = { kind?: string; metadata?: { name?: string; namespace?: string } };

// OwnerTab is the "Nodes and devices" tab of an LVMCluster's or LVMNodeSet's details page: its state and the
// nodes it gives storage to.
const OwnerTab: React.FC<{ obj: Owner }> = ({ obj }) => {
  const { t } = useLVMSTranslation();
  const { data, error, loading } = useAPI<Overview>('/overview');
  const name = obj?.metadata?.name ?? '';
  const namespace = obj?.metadata?.namespace;
  const kind = obj?.kind ?? '';
  const is = (r: { kind: string; name: string; namespace?: string }) => r.kind === kind && r.name === name && r.namespace === namespace;
  return (
    <PageSection>
      {kind === 'LVMCluster' && namespace && (
        <p>
          <Link to={`/lvms/migration/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`} data-test="migrate-link">
            {t('Migrate to LVMNodeSets')}
          </Link>
        </p>
      )}
      <Loading loading={loading} error={error} what={t('the LVMS overview')}>
        {() => {
          const owner = data!.owners.find((o) => is(o.ref));
          const nodes = data!.nodes.filter((n) => n.owners.some(is));
          return (
            <>
              {owner && (
                <p>
                  <HealthLabel health={owner.health} text={owner.state} /> {t('{{ready}} of {{desired}} nodes ready', { ready: owner.readyNodes, desired: owner.desiredNodes })}
                </p>
              )}
              <Title headingLevel="h2">{t('Nodes')}</Title>
              <Table label={t('Nodes')} head={[t('Node'), t('State'), t('Excluded'), t('Differences')]}>
                {nodes.map((n) => (
                  <tr className="pf-v6-c-table__tr" key={n.name} data-node={n.name}>
                    <Cell label={t('Node')}>
                      <Link to={nodeHref(n.name)}>{n.name}</Link>
                    </Cell>
                    <Cell label={t('State')}>
                      <HealthLabel health={n.health} text={n.state} />
                    </Cell>
                    <Cell label={t('Excluded')}>{n.excluded}</Cell>
                    <Cell label={t('Differences')}>{n.differences}</Cell>
                  </tr>
                ))}
              </Table>
            </>
          );
        }}
      </Loading>
    </PageSection>
  );
};

export default OwnerTab;
