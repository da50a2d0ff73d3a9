// End-to-end tests of the console in Debian's Chromium, driven by playwright-core. The daemon,
// the replay sandbox (recorded ComplexFuncBench responses) and the user are set up by
// tests/integration/console.rs, which runs this file with:
//   TG_URL (the daemon), TG_USER / TG_PASSWORD (an administrator), TG_SHOTS (screenshots folder).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { chromium } from 'playwright-core';

const BASE = process.env.TG_URL;
const SHOTS = process.env.TG_SHOTS ?? 'target/console-shots';
const REQUEST = 'Today is November 15th, 2024. I want to rent a car for a day at the Los Angeles International Airport. Could you compare the price differences for picking up the car at 8 AM tomorrow and the day after tomorrow at the same place for a 24-hour rental?';
if (!BASE || !process.env.TG_USER || !process.env.TG_PASSWORD) throw new Error('TG_URL, TG_USER and TG_PASSWORD are required (tests/integration/console.rs sets them)');
mkdirSync(SHOTS, { recursive: true });

let browser, context, page;
const requested = [];
const refused = [];
let askRunId = null;

before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync', '--disable-quic'],
  });
  context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  context.on('request', (r) => requested.push(r.url()));
  context.on('response', (r) => {
    if (r.status() >= 400) refused.push(`${r.status()} ${r.request().method()} ${r.url()}`);
  });
  page = await context.newPage();
  page.setDefaultTimeout(60_000);
});

after(async () => {
  await browser?.close();
});

const shot = (name) => page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });

/** Wait for `locator`; on a timeout, fail saying what the page shows and which requests were refused. */
async function see(locator, what) {
  try {
    await locator.waitFor();
  } catch (e) {
    const shown = await page.locator('main').innerText({ timeout: 2_000 }).catch(() => '(no main element)');
    await page.screenshot({ path: `${SHOTS}/failed-${what.replace(/\W+/g, '-')}.png`, fullPage: true }).catch(() => {});
    throw new Error(`${what} did not appear at ${page.url()}; the page shows ${JSON.stringify(shown.slice(0, 600))}; refused requests: ${JSON.stringify(refused.slice(-5))}\n${e.message}`);
  }
}

test('the login page turns a name and password into a cookie session (keyboard only)', async () => {
  const r = await page.goto(BASE + '/');
  assert.equal(r.status(), 200);
  assert.match(r.headers()['content-security-policy'] ?? '', /default-src 'self'/);
  await page.getByRole('heading', { name: 'Name and password' }).waitFor();
  await shot('01-login');
  // A wrong password is refused with a message, and nothing is stored.
  await page.getByLabel('Name').fill(process.env.TG_USER);
  await page.getByLabel('Password').fill('not the password');
  await page.getByLabel('Password').press('Enter');
  await page.getByText('are not valid').waitFor();
  await page.getByLabel('Password').fill(process.env.TG_PASSWORD);
  await page.getByLabel('Password').press('Enter');
  await page.getByRole('navigation', { name: 'pages' }).waitFor();
  const cookies = await context.cookies();
  const c = cookies.find((x) => x.name === 'tg_session');
  assert.ok(c, 'a session cookie');
  assert.equal(c.httpOnly, true);
  assert.equal(c.sameSite, 'Strict');
  assert.equal(await page.evaluate(() => document.cookie.includes('tg_session')), false, 'scripts cannot read it');
});

test('a state-changing request without the CSRF token is refused', async () => {
  const status = await page.evaluate(async () => {
    const r = await fetch('/v1/chains', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'x', steps: [{ api: 'a/b/c' }] }) });
    return [r.status, (await r.json()).code];
  });
  assert.deepEqual(status, [403, 'csrf_failed']);
});

test('Ask streams the steps of a ComplexFuncBench request and ends with an honest status', async () => {
  await page.goto(BASE + '/#/ask');
  await page.getByPlaceholder(/What should the tools do/).fill(REQUEST);
  await page.getByRole('button', { name: 'Ask', exact: true }).click();
  // Steps arrive while the run goes on; the end shows the status, the answer and the chain. A run
  // may end before the browser first looks, and a long finished trace is folded (its steps hidden):
  // wait for the steps to be in the page and for the outcome, never for a state that may pass.
  await page.locator('li[data-step=call]').first().waitFor({ state: 'attached', timeout: 120_000 });
  const outcome = page.locator('.outcome').first();
  await outcome.waitFor({ timeout: 120_000 });
  const status = await outcome.getAttribute('data-status');
  assert.ok(['answered', 'partial', 'gave_up', 'needs_input'].includes(status), status);
  assert.ok((await page.locator('li[data-step=retrieve], li[data-step=recall]').count()) >= 1, 'retrieval (or a recalled memory) shown');
  assert.ok((await page.locator('li[data-step=response]').count()) >= 1, 'responses shown');
  // Each call's arguments say where they came from; responses fold.
  assert.ok((await page.locator('li[data-step=call] .src').count()) >= 1);
  // A long trace is folded once the run ends: open it with the keyboard, and the steps show.
  const steps = page.locator('details.steps').first();
  if (!(await steps.evaluate((d) => d.open))) {
    await steps.locator('summary').first().focus();
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelector('details.steps')?.open === true);
  }
  await page.locator('li[data-step=call]').first().waitFor();
  await page.locator('li[data-step=response] details.response summary').first().click();
  await page.locator('li[data-step=response] details.response[open] .j-key').first().waitFor();
  const link = await outcome.locator('a[href^="#/history/run"]').getAttribute('href');
  askRunId = decodeURIComponent(link.split('id=')[1]);
  assert.match(askRunId, /^run_/);
  await shot('02-ask');
});

test('a needs_input answer shows a form for exactly the missing parameters, and continues the run', async () => {
  await page.getByRole('button', { name: 'New session' }).click();
  await page.getByPlaceholder(/What should the tools do/).fill('Show me the policies of the hotel.');
  await page.getByRole('button', { name: 'Ask', exact: true }).click();
  const form = page.locator('form.needs-input');
  await form.waitFor({ timeout: 120_000 });
  const inputs = form.locator('input');
  const n = await inputs.count();
  assert.ok(n >= 1);
  const missing = (await page.locator('.outcome[data-status=needs_input]').count()) === 1;
  assert.ok(missing, 'the status says needs input');
  await shot('03-needs-input');
  for (let i = 0; i < n; i++) await inputs.nth(i).fill('1202034');
  await form.getByRole('button', { name: 'Continue' }).click();
  // The continued run is a new turn of the same session, with the given values.
  await page.locator('.turn').nth(1).locator('.outcome').waitFor({ timeout: 120_000 });
  assert.match(await page.locator('.turn').nth(1).locator('.bubble.user').innerText(), /with: /);
});

test('an earlier conversation is listed, opens with its turns and can be continued', async () => {
  await page.goto(BASE + '/#/ask');
  const first = page.locator('ul.conversations a').first();
  await first.waitFor();
  assert.match(await first.innerText(), /policies of the hotel/);
  await first.click();
  await page.locator('.turn.earlier').nth(1).waitFor();
  assert.ok((await page.locator('.turn.earlier').count()) >= 2, 'both turns of that conversation');
  assert.match(await page.locator('[data-session]').getAttribute('data-session'), /^ses_/);
});

test('a plan-only run shows the planned chain with its data flow and sends nothing', async () => {
  await page.goto(BASE + '/#/ask');
  await page.getByRole('button', { name: 'New session' }).click();
  await page.locator('details.options summary').click();
  const dry = page.getByLabel('plan only (dry run: nothing is sent)');
  await dry.check();
  await page.getByPlaceholder(/What should the tools do/).fill(REQUEST);
  await page.getByRole('button', { name: 'Plan', exact: true }).click();
  const outcome = page.locator('.outcome[data-dry-run=true]');
  await outcome.waitFor({ timeout: 120_000 });
  const steps = outcome.locator('ol.planned-steps > li');
  assert.ok((await steps.count()) >= 1, 'a planned chain');
  assert.match(await outcome.innerText(), /nothing was sent/);
  // Planned calls have output fields instead of responses: no HTTP status anywhere.
  assert.ok((await page.locator('.turn').last().locator('li[data-step=response]', { hasText: 'planned' }).count()) >= 1);
  assert.equal(await page.locator('.turn').last().locator('li[data-step=response]', { hasText: 'HTTP' }).count(), 0);
  // The stored run says so too: a dry run, no HTTP call.
  const id = decodeURIComponent((await outcome.locator('a[href^="#/history/run"]').getAttribute('href')).split('id=')[1]);
  const stats = await page.evaluate(async (id) => (await (await fetch('/v1/runs/' + encodeURIComponent(id))).json()).stats, id);
  assert.equal(stats.dry_run, true);
  assert.equal(stats.http_calls, 0);
  await shot('03b-plan-only');
  // The choice is kept for the next visit; turned off again, the button asks.
  await page.reload();
  await page.getByRole('button', { name: 'Plan', exact: true }).waitFor();
  await page.locator('details.options summary').click();
  await page.getByLabel('plan only (dry run: nothing is sent)').uncheck();
  await page.getByRole('button', { name: 'Ask', exact: true }).waitFor();
});

test('register an API: the test call is shown before admission', async () => {
  await page.goto(BASE + '/#/tools/register');
  await page.getByLabel('Name').fill('Car_Location_Lookup');
  await page.getByLabel('Tool').fill('console-test');
  await page.getByLabel('Category').fill('Travel');
  await page.getByLabel('URL').fill('https://booking-com15.p.rapidapi.com/api/v1/cars/searchDestination');
  await page.getByRole('button', { name: 'Add a parameter' }).click();
  await page.getByLabel('parameter name').fill('query');
  await page.getByLabel('required').check();
  await page.getByLabel('Example arguments (JSON)').fill('{"query": "Los Angeles International Airport"}');
  assert.equal(await page.getByRole('button', { name: 'Admit' }).isDisabled(), true, 'no admission before a test call');
  await page.getByRole('button', { name: 'Test call' }).click();
  await page.locator('.test-call').waitFor();
  assert.match(await page.locator('.test-call h3').innerText(), /HTTP 200/);
  await shot('04-register');
  await page.getByRole('button', { name: 'Admit' }).click();
  await page.getByText('Admitted:').waitFor();
  await page.getByRole('link', { name: 'travel/console_test/car_location_lookup' }).click();
  await see(page.getByRole('heading', { name: /Car_Location_Lookup/ }), 'the admitted API page');
  await page.locator('table.args code', { hasText: 'query' }).waitFor();
});

test('a page whose read is answered "busy" asks again after Retry-After and loads', async () => {
  let answeredBusy = 0;
  await page.route('**/v1/tools/travel/**', async (route) => {
    if (route.request().method() === 'GET' && answeredBusy === 0) {
      answeredBusy += 1;
      // A stand-in for the daemon under load (429 with Retry-After), answered by the browser itself.
      await route.fulfill({ status: 429, headers: { 'retry-after': '1', 'content-type': 'application/json' }, body: JSON.stringify({ code: 'busy', message: 'the daemon is busy' }) });
    } else await route.continue();
  });
  try {
    const t0 = Date.now();
    await page.goto(BASE + '/#/tools');
    await page.goto(BASE + '/#/tools/api?id=' + encodeURIComponent('travel/console_test/car_location_lookup'));
    await see(page.getByRole('heading', { name: /Car_Location_Lookup/ }), 'the API page after a busy answer');
    assert.equal(answeredBusy, 1);
    assert.ok(Date.now() - t0 >= 900, 'it waited for Retry-After');
  } finally {
    await page.unroute('**/v1/tools/travel/**');
  }
});

test('the chain editor opens a run, edits a step, validates, executes and saves a template', async () => {
  assert.ok(askRunId, 'the Ask test made a run');
  await page.goto(BASE + '/#/chains?run=' + encodeURIComponent(askRunId));
  await page.getByText(`Opened the chain of run ${askRunId}`).waitFor();
  const steps = page.locator('li.chain-step');
  await steps.first().waitFor();
  const before = await steps.count();
  assert.ok(before >= 1);
  // A bad literal is refused before anything is sent, naming the step.
  await page.getByPlaceholder('search APIs to add a step').fill('search car rental location');
  await page.getByPlaceholder('search APIs to add a step').press('Enter');
  await page.locator('button.add-step').first().click();
  await steps.nth(before).waitFor();
  assert.equal(await steps.count(), before + 1);
  await page.getByRole('button', { name: `delete step ${before + 1}` }).click();
  await page.waitForFunction((n) => document.querySelectorAll('li.chain-step').length === n, before);
  await page.getByRole('button', { name: 'Validate' }).click();
  await page.locator('[data-valid=true]').waitFor();
  await page.getByRole('button', { name: 'Execute' }).click();
  await page.locator('.results .outcome').waitFor({ timeout: 120_000 });
  assert.ok((await page.locator('.results li[data-step=response]').count()) >= 1);
  await page.getByText('Save as a template').click();
  await page.getByPlaceholder('template name').fill('LAX car rental comparison');
  await page.getByRole('button', { name: 'Save', exact: true }).click();
  await page.locator('ul.saved').getByText('LAX car rental comparison').waitFor();
  await shot('05-chain-editor');
});

test('History lists the runs, filters them, opens one and compares two', async () => {
  await page.goto(BASE + '/#/history');
  await page.locator('tr[data-run]').first().waitFor();
  assert.ok((await page.locator('tr[data-run]').count()) >= 3);
  await page.getByLabel('Status').selectOption('needs_input');
  await page.getByRole('button', { name: 'Filter' }).click();
  // The unfiltered rows stay until the filtered list arrives: wait for the filtered list itself.
  const filtered = () => {
    const s = [...document.querySelectorAll('tr[data-run] .badge')].map((e) => e.dataset.status);
    return s.length >= 1 && s.every((x) => x === 'needs_input');
  };
  await page.waitForFunction(filtered).catch(() => {});
  const statuses = await page.locator('tr[data-run] .badge').evaluateAll((els) => els.map((e) => e.dataset.status));
  assert.ok(statuses.length >= 1 && statuses.every((s) => s === 'needs_input'), statuses.join());
  await page.getByLabel('Status').selectOption('');
  await page.getByRole('button', { name: 'Filter' }).click();
  await page.locator(`tr[data-run="${askRunId}"]`).waitFor();
  const boxes = page.locator('tr[data-run] input[type=checkbox]');
  await boxes.nth(0).check();
  await boxes.nth(1).check();
  await shot('06-history');
  await page.getByRole('button', { name: 'Compare the two selected' }).click();
  await page.getByRole('heading', { name: 'Compare runs' }).waitFor();
  await page.goto(BASE + '/#/history/run?id=' + encodeURIComponent(askRunId));
  await page.getByRole('heading', { name: /^Run/ }).waitFor();
  assert.ok((await page.locator('li[data-step=call]').count()) >= 1, 'the stored trace');
  await page.getByRole('button', { name: 'Re-run' }).click();
  await page.getByText('New run:').waitFor({ timeout: 120_000 });
});

test('the graph view draws START’s neighbourhood and expands a node on click', async () => {
  await page.goto(BASE + '/#/graph?id=START');
  await page.waitForFunction(() => Number(document.getElementById('graph-canvas')?.dataset.nodes ?? 0) > 1);
  const before = await page.evaluate(() => window.__toolgraphGraph.nodes().length);
  // Click the first API node where it is drawn.
  const pos = await page.evaluate(() => {
    const n = window.__toolgraphGraph.nodes('[kind = "api"]').first();
    const p = n.renderedPosition();
    const r = document.getElementById('graph-canvas').getBoundingClientRect();
    return { x: r.left + p.x, y: r.top + p.y, id: n.id() };
  });
  await page.mouse.click(pos.x, pos.y);
  await page.locator('aside.panel h2').waitFor();
  await page.waitForFunction((id) => window.__toolgraphGraph.getElementById(id).hasClass('expanded'), pos.id);
  const after = await page.evaluate(() => window.__toolgraphGraph.nodes().length);
  assert.ok(after >= before, `${after} >= ${before}`);
  const styles = await page.evaluate(() => window.__toolgraphGraph.edges('[kind = "NEXT"]').length);
  assert.ok(styles >= 1, 'NEXT edges drawn');
  await shot('07-graph');
});

test('Tools, Memory and Settings pages load', async () => {
  await page.goto(BASE + '/#/tools');
  await page.getByRole('link', { name: 'Travel' }).click();
  await page.getByRole('link', { name: 'booking-com15' }).click();
  await page.locator('table.apis tbody tr').first().waitFor();
  await shot('08-tools');
  // An API's page says where its arguments come from (learned from remembered runs).
  await page.locator('table.apis tbody tr a').first().click();
  await page.getByRole('heading', { name: 'Where its arguments come from' }).waitFor();
  await page.locator('.learned').first().waitFor();
  await shot('08-api');
  await page.goto(BASE + '/#/memory');
  await page.getByRole('heading', { name: 'Memory' }).waitFor();
  await page.locator('main .loading').waitFor({ state: 'detached' });
  await shot('09-memory');
  await page.goto(BASE + '/#/settings');
  await page.getByRole('heading', { name: 'Users and keys' }).waitFor();
  await page.locator('table.users tbody tr').first().waitFor();
  await shot('10-settings');
});

test('usable at a phone’s width', async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  for (const route of ['#/ask', '#/history', '#/tools', '#/graph']) {
    await page.goto(BASE + '/' + route);
    await page.locator('main h1').waitFor();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 1, `${route} scrolls sideways by ${overflow}px`);
  }
  await page.goto(BASE + '/#/ask');
  await shot('11-phone-ask');
  await page.setViewportSize({ width: 1280, height: 860 });
});

test('logging out ends the session; no request left the machine', async () => {
  await page.goto(BASE + '/#/ask');
  await page.getByRole('button', { name: 'Log out' }).click();
  await page.getByRole('heading', { name: 'Name and password' }).waitFor();
  const status = await page.evaluate(async () => (await fetch('/v1/me')).status);
  assert.equal(status, 401);
  const origin = new URL(BASE).origin;
  const outside = requested.filter((u) => !u.startsWith(origin + '/') && !u.startsWith('data:') && !u.startsWith('blob:'));
  assert.deepEqual(outside, [], 'every request went to the daemon');
  assert.ok(requested.length > 20);
});
