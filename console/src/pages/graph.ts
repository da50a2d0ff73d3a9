// Graph: the neighbourhood of an API or of START — NEXT edges (width: dynamic weight; label:
// static / dynamic), FEEDS edges dashed, colour by category, size by availability; a click
// expands a node and shows its properties; filter by category; a read-only Cypher box.
import cytoscape from 'cytoscape';
import { get, post, qs } from '../api';
import { clear, errorBox, field, h, into, jsonView, routeParams } from '../dom';
import { short } from '../timeline';
import type { Ctx } from '../main';

const PALETTE = ['#2563eb', '#16a34a', '#d97706', '#9333ea', '#dc2626', '#0891b2', '#4d7c0f', '#c026d3', '#ea580c', '#0f766e', '#7c3aed', '#be123c'];
function colour(category: string): string {
  if (!category) return '#334155';
  let x = 0;
  for (const c of category) x = (x * 31 + c.charCodeAt(0)) >>> 0;
  return PALETTE[x % PALETTE.length];
}

export async function graphPage(main: HTMLElement, ctx: Ctx) {
  const start = routeParams().get('id') ?? 'START';
  const container = h('div', { class: 'graph', id: 'graph-canvas', role: 'img', 'aria-label': 'tool graph neighbourhood' });
  const panel = h('aside', { class: 'panel', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Click a node to expand it and see its properties.'));
  const filter = h('select', { name: 'category', 'aria-label': 'filter by category' }, h('option', { value: '' }, 'all categories'));
  const center = h('input', { name: 'center', value: start, 'aria-label': 'API id or START' });
  const status = h('p', { class: 'muted', 'aria-live': 'polite' });
  const cypherBox = h('div');
  clear(
    main,
    h('h1', null, 'Graph'),
    h('form', { class: 'row', onsubmit: (e: Event) => { e.preventDefault(); location.hash = '#/graph?id=' + encodeURIComponent(center.value.trim() || 'START'); } }, field('Centre', center), h('button', { type: 'submit' }, 'Show'), field('Category', filter)),
    status,
    h('div', { class: 'split graph-split' }, container, panel),
    cypherBox,
  );
  const cy = cytoscape({
    container,
    wheelSensitivity: 0.3,
    style: [
      { selector: 'node', style: { label: 'data(label)', 'background-color': 'data(colour)', width: 'data(size)', height: 'data(size)', 'font-size': 9, color: '#0f172a', 'text-valign': 'bottom', 'text-wrap': 'ellipsis', 'text-max-width': '110px' } },
      { selector: 'node[kind = "terminal"]', style: { shape: 'round-rectangle', 'background-color': '#0f172a', color: '#0f172a' } },
      { selector: 'node.expanded', style: { 'border-width': 3, 'border-color': '#0f172a' } },
      { selector: 'node:selected', style: { 'border-width': 4, 'border-color': '#f59e0b' } },
      { selector: 'edge[kind = "NEXT"]', style: { width: 'data(width)', 'line-color': '#94a3b8', 'target-arrow-color': '#94a3b8', 'target-arrow-shape': 'triangle', 'curve-style': 'bezier', label: 'data(label)', 'font-size': 7, 'text-rotation': 'autorotate', color: '#475569' } },
      { selector: 'edge[kind = "FEEDS"]', style: { width: 1, 'line-style': 'dashed', 'line-color': '#f97316', 'target-arrow-color': '#f97316', 'target-arrow-shape': 'vee', 'curve-style': 'bezier' } },
      { selector: '.hidden', style: { display: 'none' } },
    ],
  });
  const categories = new Set<string>();
  const expand = async (id: string) => {
    status.textContent = `Loading the neighbourhood of ${short(id)}…`;
    try {
      const n = await get<any>('/v1/graph/neighborhood' + qs({ id, k: 8 }));
      for (const node of n.nodes) {
        if (cy.getElementById(node.id).nonempty()) continue;
        if (node.category) categories.add(node.category);
        const size = node.kind === 'terminal' ? 30 : 16 + 28 * (node.availability ?? 0);
        cy.add({ group: 'nodes', data: { ...node, id: node.id, label: node.kind === 'terminal' ? node.id : node.name, colour: colour(node.category), size } });
      }
      for (const e of n.edges) {
        const eid = `${e.kind}:${e.from}->${e.to}`;
        if (cy.getElementById(eid).nonempty()) continue;
        const data: any = { ...e, id: eid, source: e.from, target: e.to };
        if (e.kind === 'NEXT') {
          data.width = 1 + 7 * Math.min(1, e.dynamic_weight);
          data.label = `${(+e.static_weight).toFixed(2)} / ${(+e.dynamic_weight).toFixed(2)}`;
        }
        cy.add({ group: 'edges', data });
      }
      cy.getElementById(id).addClass('expanded');
      const current = filter.value;
      filter.replaceChildren(h('option', { value: '' }, 'all categories'), ...[...categories].sort().map((c) => h('option', { value: c }, c)));
      filter.value = current;
      applyFilter();
      cy.layout({ name: 'cose', animate: false, nodeDimensionsIncludeLabels: true, randomize: false, fit: true, padding: 20 } as any).run();
      status.textContent = `${cy.nodes().length} nodes, ${cy.edges().length} edges (NEXT: static / dynamic weight; FEEDS dashed). ${short(id)} has ${n.successors_total} successors and ${n.predecessors_total} predecessors.`;
      container.dataset.nodes = String(cy.nodes().length);
    } catch (e) {
      status.replaceChildren(errorBox(e));
    }
  };
  const applyFilter = () => {
    const c = filter.value;
    cy.nodes().forEach((n) => {
      const keep = !c || n.data('kind') === 'terminal' || n.data('category') === c;
      n.toggleClass('hidden', !keep);
    });
  };
  filter.addEventListener('change', applyFilter);
  cy.on('tap', 'node', (ev) => {
    const d = ev.target.data();
    const props = { ...d };
    for (const k of ['colour', 'size', 'label']) delete props[k];
    clear(panel, h('h2', null, d.label), d.kind === 'api' ? h('p', null, h('a', { href: '#/tools/api?id=' + encodeURIComponent(d.id) }, 'the API’s page')) : null, jsonView(props));
    if (!ev.target.hasClass('expanded')) expand(d.id);
  });
  (window as any).__toolgraphGraph = cy; // for the browser tests: what is drawn
  await expand(start);

  if (ctx.me.role === 'admin') {
    const query = h('textarea', { name: 'cypher', rows: 3, 'aria-label': 'Cypher query' }, 'MATCH (a:Step)-[e:NEXT]->(b:Step) RETURN a.id, b.id, e.static_weight, e.dynamic_weight ORDER BY e.dynamic_weight DESC LIMIT 10');
    const out = h('div');
    const run = () =>
      into(out, async () => {
        const r = await post<any>('/v1/graph/cypher', { query: query.value });
        return [h('table', { class: 'args' }, h('thead', null, h('tr', null, r.columns.map((c: string) => h('th', null, c)))), h('tbody', null, r.rows.map((row: any[]) => h('tr', null, row.map((v) => h('td', null, typeof v === 'object' ? JSON.stringify(v) : String(v))))))), r.truncated ? h('p', { class: 'muted' }, 'truncated') : null];
      }, 'Running');
    clear(cypherBox, h('h2', null, 'Cypher (read-only)'), h('p', { class: 'muted' }, 'On the FalkorDB and Neo4j backends; the embedded store answers that it has no Cypher.'), query, h('button', { type: 'button', onclick: run }, 'Run'), out);
  }
}
