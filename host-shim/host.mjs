// ovai's plugin host: the Node child that imports plugins/*.mjs and runs their `run`.
//
// `ovai serve` starts it with two private pipes, fd 3 to read from and fd 4 to write to (and a socket, fd 5,
// for its second thread: see SECOND_THREAD), and speaks
// newline-delimited JSON over them, so a plugin that prints to stdout cannot corrupt the protocol: stdout and stderr are read by the daemon as
// log lines. This file reports facts (what a module exports, what `run` answered, what it threw); the
// daemon turns them into the sentences people read. No npm dependencies: it must run on a bare Node >= 18.

import net from "node:net";
import { Worker } from "node:worker_threads";
import fs from "node:fs";
import childProcess from "node:child_process";
import url from "node:url";
import { types } from "node:util";
import path from "node:path";
import os from "node:os";
import nodeModule from "node:module";
import vm from "node:vm";

const PROTOCOL = 2;

// What the host relies on, taken before any plugin is imported: a plugin that patches JSON, Object,
// String, Buffer, Map or process afterwards cannot change what another call's context carries, or what
// another call answers. (Plugins share this process, so one set on it can still read another's memory;
// the README says so.)
const stringify = JSON.stringify;
const parse = JSON.parse;
const freeze = Object.freeze;
const ownKeys = Object.keys;
const ownValues = Object.values;
const toText = String;
const byteLength = Buffer.byteLength;
const nextTurn = setImmediate;
// setImmediate finds `ref` and its callback's slot through Immediate.prototype; a named import is a live
// binding that module.syncBuiltinESMExports() rewrites: both are taken out of a plugin's reach here.
freeze(Object.getPrototypeOf(setImmediate(() => {})));
const writeSync = fs.writeSync;
const spawnSync = childProcess.spawnSync;
const pathToFileURL = url.pathToFileURL;
const fileURLToPath = url.fileURLToPath;
const AbortCtl = AbortController;
const DOMExceptionCtor = DOMException;
const ErrorCtor = Error;
const DateCtor = Date;
const RegExpCtor = RegExp;
const captureStack = Error.captureStackTrace;
const isArray = Array.isArray;
const apply = Reflect.apply;
const includes = String.prototype.includes;
// Methods called as functions (`utf8Slice(buf, 0, n)`), as Node's own internals do it: fast, and out of
// a plugin's reach once taken.
const uncurry = Function.prototype.bind.bind(Function.prototype.call);
// Taken before any plugin runs, as the other built-ins here: a plugin may patch `fs`.
const existsSync = fs.existsSync;
const pathRelative = path.relative;
const startsWith = uncurry(String.prototype.startsWith);
const regexpExec = uncurry(RegExp.prototype.exec);
const globalObject = globalThis;
const indexOfByte = uncurry(Buffer.prototype.indexOf);
const utf8Slice = uncurry(Buffer.prototype.utf8Slice);
const copyBytes = uncurry(Buffer.prototype.copy);
const subBytes = uncurry(Buffer.prototype.subarray);
const allocBytes = Buffer.allocUnsafe;
const bytesOf = Buffer.from;
const push = uncurry(Array.prototype.push);
const textIndexOf = uncurry(String.prototype.indexOf);
const textLastIndexOf = uncurry(String.prototype.lastIndexOf);
const textSlice = uncurry(String.prototype.slice);
const split = String.prototype.split;
const charCodeAt = uncurry(String.prototype.charCodeAt);
const abortWith = uncurry(AbortController.prototype.abort);
const functionText = uncurry(Function.prototype.toString);
const prototypeOf = Object.getPrototypeOf;
const plainPrototype = Object.prototype;
const MapCtor = Map;
const SetCtor = Set;
const ArrayBufferCtor = ArrayBuffer;
const isBuffer = Buffer.isBuffer;
const signalOf = uncurry(Object.getOwnPropertyDescriptor(AbortController.prototype, "signal").get);
const protoOf = Object.getPrototypeOf;
const hasOwn = Object.hasOwn ?? ((o, k) => apply(Object.prototype.hasOwnProperty, o, [k]));
const setProto = Object.setPrototypeOf;
const defineOwn = Object.defineProperty;
const min = Math.min;
// The stack's call sites, read in a realm of the host's own: V8 formats a stack with the Error of the
// realm its holder was made in, so a plugin that freezes, replaces or shapes this realm's Error (its
// prepareStackTrace, its stackTraceLimit) changes nothing here. Its frames are this realm's all the same.
// The realm's Error and captureStackTrace are taken once, when it is made, and its sandbox has no
// prototype: a name looked up there could otherwise be found on this realm's Object.prototype.
const sitesNow = vm.runInContext(
  "(() => { const E = Error; const capture = E.captureStackTrace; const prepare = (_, sites) => sites; " +
    "return function sitesNow() { const holder = {}; E.prepareStackTrace = prepare; E.stackTraceLimit = 64; " +
    "capture(holder, sitesNow); return holder.stack; }; })()",
  vm.createContext(Object.create(null)),
);
// Their methods, taken before any plugin is imported.
const callSiteProto = Object.getPrototypeOf(sitesNow()[0]);
const siteIsEval = uncurry(callSiteProto.isEval);
const siteFile = uncurry(callSiteProto.getFileName);
const siteLine = uncurry(callSiteProto.getLineNumber);
const siteColumn = uncurry(callSiteProto.getColumnNumber);
const isPromise = types.isPromise;
const ObjectProto = Object.prototype;

if (process.env.OVAI_HOST !== String(PROTOCOL)) {
  process.stderr.write(
    "This is ovai's plugin host; `ovai serve` starts it. To try a plugin from a terminal, run " +
      "`ovai call TOOL '{...}'` in the instance.\n",
  );
  process.exit(64);
}

// The box (bubblewrap) sets PWD; the host's environment is exactly what the daemon chose.
delete process.env.PWD;

// Lines are read into one buffer that is reused (`onread`): no stream machinery, no allocation per read.
const READ_BYTES = 64 * 1024;
const IN = 3;
const OUT = 4;
let channel;
try {
  channel = new net.Socket({
    fd: IN,
    readable: true,
    writable: false,
    onread: { buffer: allocBytes(READ_BYTES), callback: onBytes },
  });
  // fd 4 is written with plain blocking writes, never through a stream (below): it is only checked here.
  fs.fstatSync(OUT);
} catch (err) {
  process.stderr.write(`ovai's plugin host has no protocol channel on fds 3 and 4 (${err.message}); start it with \`ovai serve\`.\n`);
  process.exit(64);
}

/** Name → { file, run } for every module this process imported successfully (no prototype to patch). */
const tools = { __proto__: null };
/** Call id → Running, for the calls in flight. */
const calls = new Map();
const mapHas = uncurry(Map.prototype.has);
const mapGet = uncurry(Map.prototype.get);
// JavaScript's constructors written as a schema's type, and the JSON Schema type each means.
const typeNames = new Map([
  [String, ["String", "string"]],
  [Number, ["Number", "number"]],
  [Boolean, ["Boolean", "boolean"]],
  [Array, ["Array", "array"]],
  [Object, ["Object", "object"]],
  [Date, ["Date", "string"]],
]);
const mapSet = uncurry(Map.prototype.set);
const mapDelete = uncurry(Map.prototype.delete);
const mapSize = uncurry(Object.getOwnPropertyDescriptor(Map.prototype, "size").get);
const inFlight = (id) => mapHas(calls, id);
/** Forgets a call; true when it was still in flight (then nobody has answered it yet). */
const settle = (id) => mapDelete(calls, id);
/** Call id → the send of its progress report the pace holds back: it goes out before the answer. */
const heldReports = new Map();
/** `settle`, for a call about to be answered: its held report first, so a progress bar reaches its end. */
function answering(id) {
  const held = mapGet(heldReports, id);
  if (held !== undefined) held();
  return settle(id);
}
let root = "";
let config = freeze({});
let maxAnswerBytes = 1024 * 1024;
let pluginsDir = "";
/** plugins/ as the prefix of its files' URLs, from `init`. */
let pluginsURL = "";
/** The host is writing its own words: what it prints is not a plugin's. */
let speaking = false;
/** From `init`: carried by every `stray`, so a plugin writing to fd 4 cannot pass for one. */
let hostKey = 0;
/** From `init`: the host runs in the box, whose /tmp (and $TMPDIR) is its own and which refuses Unix sockets. */
let boxed = false;
let rootFolders = new Set();
/** The box's temporary folders, as the daemon started the host (a plugin may change the environment). */
const tempDirs = [...new Set(["/tmp", process.env.TMPDIR].filter((d) => typeof d === "string" && d.startsWith("/")))].map(
  (d) => (d.endsWith("/") ? d : `${d}/`),
);

// The environment's names as the daemon started the host (a plugin may change it): a name an error
// speaks of that is not among them may be one the daemon has and does not pass (only pluginEnv's are).
const startEnv = new Set(Object.keys(process.env));

// Messages made in one turn of the event loop (the answers of every call its reads brought, at K calls
// in flight) go out in one write, at the end of that turn: a write per message cost the host and the
// daemon more than the calls themselves. A message made when nothing else is under way goes out at once.
// Until then they wait in shared memory, where a second thread (the rescuer, below) writes them itself if
// the main thread stops before it does: a plugin whose code blocks the event loop next (and gets the host
// killed) cannot take an answer already made down with it. Nothing is ever queued anywhere else: a write
// the pipe cannot take at once waits for the daemon to read (it always does, to the end of each line).
const HELD_BYTES = 1024 * 1024;
// The words both threads share: who is writing to fd 4, how many bytes are held, how many times the main
// thread has let them go, whether the rescuer sleeps until something is held, one nobody changes (to
// sleep on), and whether the rescuer is running: nothing is held until it is.
const LOCK = 0;
const HELD = 1;
const FLUSHES = 2;
const ASLEEP = 3;
const NEVER = 4;
const ALIVE = 5;
const MAIN = 1;
const Bytes = Uint8Array;
const heldMemory = new SharedArrayBuffer(HELD_BYTES);
const heldBytes = new Bytes(heldMemory);
// fs.writeSync reads the array's size through TypedArray.prototype, which a plugin can patch: the held
// array carries its own, out of reach.
sizedOwn(heldBytes, HELD_BYTES);
const shared = new Int32Array(new SharedArrayBuffer(6 * 4));
const atomicLoad = Atomics.load;
const atomicStore = Atomics.store;
const atomicAdd = Atomics.add;
const atomicSwap = Atomics.compareExchange;
const atomicWait = Atomics.wait;
const atomicNotify = Atomics.notify;
// Views made by the constructor taken here, not by `subarray`, which asks the array's constructor for its
// species: a plugin's patch there could point the host's writes somewhere else.
const heldFrom = (start) => new Bytes(heldMemory, start, HELD_BYTES - start);
const encodeInto = uncurry(TextEncoder.prototype.encodeInto);
const encode = uncurry(TextEncoder.prototype.encode);
const getOwn = Object.getOwnPropertyDescriptor;
// For describing what a plugin threw or answered, and finding where its syntax fails: a plugin may
// replace any global before it throws.
const nowMs = Date.now;
const readFileSync = fs.readFileSync;
const readdirSync = fs.readdirSync;
const resolvePath = path.resolve;
const dirnameOf = path.dirname;
const trimEnd = uncurry(String.prototype.trimEnd);
const joinWith = uncurry(Array.prototype.join);
const asyncIterator = Symbol.asyncIterator;
const iterator = Symbol.iterator;
const encoder = new TextEncoder();
let flushScheduled = false;
// At most this many messages are held: a turn that answers many calls (a read that brought them) lets
// each few go at once, so the daemon takes them on while the rest are run, rather than all of them
// waiting for the last.
const HOLD_LINES = 8;
let heldLines = 0;

/** Sends a message; `now`: at once, after what is held, rather than with the rest of the turn's. */
function send(message, now = false) {
  sendLine(wellFormed(stringify(bare(message))), now);
}

/**
 * The message with every object and array in it copied without a prototype: nothing a plugin puts on
 * Object.prototype or Array.prototype (a toJSON, a getter) takes part in writing it.
 */
function bare(value) {
  if (value === null || typeof value !== "object") return value;
  if (isArray(value)) {
    const copy = [];
    setProto(copy, null);
    for (let i = 0; i < value.length; i++) copy[i] = bare(value[i]);
    return copy;
  }
  const copy = { __proto__: null };
  const keys = ownKeys(value);
  for (let i = 0; i < keys.length; i++) copy[keys[i]] = bare(value[keys[i]]);
  return copy;
}

function sendLine(line, now = false) {
  const text = line + "\n";
  // A UTF-16 unit is at most three bytes of UTF-8: a line that may not fit is not held either.
  if (
    now ||
    text.length * 3 > HELD_BYTES ||
    (quiet() && atomicLoad(shared, HELD) === 0) ||
    !rescuerRunning()
  ) {
    // Every lock is let go of in a `finally`: a plugin's own stack can run out inside (a progress report
    // made deep in its recursion), and a lock kept would stop every message for good.
    takeLock();
    try {
      const held = atomicLoad(shared, HELD);
      if (held > 0) writeHeld(held);
      write(text, byteLength(text));
    } finally {
      releaseLock();
    }
    return;
  }
  takeLock();
  try {
    let held = atomicLoad(shared, HELD);
    if (held + text.length * 3 > HELD_BYTES) {
      writeHeld(held);
      held = 0;
    }
    const { written } = encodeInto(encoder, text, heldFrom(held));
    atomicStore(shared, HELD, held + written);
    if (++heldLines >= HOLD_LINES) writeHeld(held + written);
  } finally {
    releaseLock();
  }
  if (atomicLoad(shared, ASLEEP) === 1) {
    atomicStore(shared, ASLEEP, 0);
    atomicNotify(shared, ASLEEP);
  }
  if (!flushScheduled) {
    flushScheduled = true;
    nextTurn(flush);
  }
}

/** Nothing else will be said this turn: no line is being read or waits, and no call is in flight. */
function quiet() {
  return !reading && waiting === null && mapSize(calls) === 0;
}

function flush() {
  flushScheduled = false;
  takeLock();
  try {
    writeHeld(atomicLoad(shared, HELD));
  } finally {
    releaseLock();
  }
}

/** Writes what is held; the lock is taken. */
function writeHeld(held) {
  heldLines = 0;
  if (held > 0) write(null, held);
  atomicStore(shared, HELD, 0);
  atomicAdd(shared, FLUSHES, 1);
}

/**
 * Writes a string (`length` bytes of UTF-8) or the first `length` held bytes (text null) to fd 4, whole.
 * A pipe the daemon has not read yet (EAGAIN, if fd 4 was left non-blocking) is waited for; one nobody
 * reads any more ends the host.
 */
function write(text, length) {
  let bytes = heldBytes;
  let at = 0;
  while (at < length) {
    try {
      at += text !== null && at === 0 ? writeSync(OUT, text) : writeSync(OUT, bytes, at, length - at);
    } catch (err) {
      // Only the system's refusals are the pipe's; anything else (a RangeError: the caller's stack ran
      // out) goes back to the caller, the lock let go of on the way.
      const code = errnoCode(err);
      if (code === undefined) throw err;
      if (code !== "EAGAIN") exitHost(0);
      atomicWait(shared, NEVER, 0, 1);
      continue;
    }
    if (text !== null && at < length) {
      bytes = sizedOwn(encode(encoder, text), length);
      text = null;
    }
  }
}

/** The errno name of a system call's failure (an own `code` beside an own numeric `errno`), or undefined. */
function errnoCode(err) {
  if (err === null || typeof err !== "object") return undefined;
  const errno = getOwn(err, "errno");
  const code = getOwn(err, "code");
  return errno !== undefined && typeof errno.value === "number" && code !== undefined && typeof code.value === "string"
    ? code.value
    : undefined;
}

/** The array with its own size, which fs.writeSync then reads instead of a plugin's patch. */
function sizedOwn(array, size) {
  defineOwn(array, "byteLength", { __proto__: null, value: size });
  defineOwn(array, "length", { __proto__: null, value: size });
  return array;
}

function takeLock() {
  // Only the rescuer can hold it, and only while the main thread had stopped: wait for it to finish.
  while (atomicSwap(shared, LOCK, 0, MAIN) !== 0) {
    const holder = atomicLoad(shared, LOCK);
    // The main thread's own: left by a section whose caller's stack ran out before even its `finally`
    // could let go (no section calls back into another).
    if (holder === MAIN) return;
    if (holder !== 0) atomicWait(shared, LOCK, holder, 100);
  }
}

function releaseLock() {
  atomicStore(shared, LOCK, 0);
}

// The host's second thread has two jobs, in one isolate (a thread costs the host's start about 25 ms of
// CPU). Its own isolate: no plugin's patches reach it (a plugin set on ending it can, through
// node:inspector: plugins share the host). It waits on its event loop, never in a blocking call: a thread
// blocked in a system call would keep the host from ever exiting.
//
// The rescuer looks every RESCUE_MS at what is held, and writes it when the main thread has held it
// through a whole look without letting it go. It sleeps outright once nothing has been held for a second,
// and the main thread wakes it with the next message.
//
// The watcher answers, on fd 5, where the main thread is when the daemon finds it stopped answering (a
// plugin's loop that never ends holds the event loop): it pauses the main thread through node:inspector,
// which reaches JavaScript that is running, and names the files and places on its stack, so the daemon
// can say which plugin it was. A host started without fd 5 (by hand, or by the shim's own tests), or
// without node:inspector, cannot say, and the daemon finds the plugin another way.
const RESCUE_MS = 50;
const WHERE = 5;
const SECOND_THREAD = `
const { workerData: { shared, held, fd, every, where } } = require("node:worker_threads");
const { writeSync } = require("node:fs");
const net = require("node:net");
const { fileURLToPath } = require("node:url");
const [LOCK, HELD, FLUSHES, ASLEEP, ALIVE, MINE] = [0, 1, 2, 3, 5, 2];

// Resolves when the main thread changes shared[index] from value and says so, or after ms.
const sleep = (index, value, ms) => {
  const r = Atomics.waitAsync(shared, index, value, ms);
  return r.async ? r.value : Promise.resolve(r.value);
};

async function rescue() {
  let seen = -1;
  let idle = 0;
  for (;;) {
    await sleep(ASLEEP, 0, every);
    const bytes = Atomics.load(shared, HELD);
    const flushes = Atomics.load(shared, FLUSHES);
    if (bytes === 0) {
      seen = -1;
      if (++idle * every < 1000) continue;
      idle = 0;
      Atomics.store(shared, ASLEEP, 1);
      if (Atomics.load(shared, HELD) === 0) await sleep(ASLEEP, 1, Infinity);
      Atomics.store(shared, ASLEEP, 0);
      continue;
    }
    idle = 0;
    if (flushes !== seen) {
      seen = flushes;
      continue;
    }
    // Held since the last look: the main thread has stopped.
    if (Atomics.compareExchange(shared, LOCK, 0, MINE) !== 0) continue;
    // What the pipe does not take now (the daemon is behind) stays held, for the next look or the main
    // thread: the lock is never kept while waiting.
    const length = Atomics.load(shared, HELD);
    let at = 0;
    try {
      while (at < length) at += writeSync(fd, held, at, length - at);
    } catch {}
    if (at > 0 && at < length) held.copyWithin(0, at, length);
    Atomics.store(shared, HELD, length - at);
    Atomics.add(shared, FLUSHES, 1);
    seen = -1;
    Atomics.store(shared, LOCK, 0);
    Atomics.notify(shared, LOCK);
  }
}

let inspector = null;
let why = "";
try {
  inspector = require("node:inspector");
} catch (err) {
  why = String(err && err.message);
}
let socket = null;
try {
  socket = new net.Socket({ fd: where, readable: true, writable: true });
  socket.on("error", () => {});
} catch {}
// A pending waitAsync does not keep a thread's event loop running, and the socket may end or fail: the
// rescuer must outlive both.
setInterval(() => {}, 1 << 30);
let text = "";
socket?.on("data", (chunk) => {
  text += chunk;
  if (text.length > 65536) text = text.slice(-65536);
  let nl;
  while ((nl = text.indexOf("\\n")) >= 0) {
    const line = text.slice(0, nl);
    text = text.slice(nl + 1);
    let key;
    try {
      key = JSON.parse(line).where;
    } catch {
      continue;
    }
    if (typeof key === "number") answerWhere(key);
  }
});
const MAX_FRAMES = 32;
function answerWhere(key) {
  const reply = (frames, why) => socket.write(JSON.stringify({ where: key, frames, why }) + "\\n");
  if (inspector === null) return reply([], why);
  const session = new inspector.Session();
  try {
    session.connectToMainThread();
  } catch (err) {
    return reply([], String(err && err.message));
  }
  // A script is taken for a file of its own only as an ES module loaded without a sourceURL: code a
  // plugin evaluates can give itself any file's name (a sourceURL, vm's filename).
  const scripts = new Map();
  session.on("Debugger.scriptParsed", (m) =>
    scripts.set(m.params.scriptId, { url: m.params.url, module: m.params.isModule === true && !m.params.hasSourceURL }),
  );
  session.once("Debugger.paused", (m) => {
    const frames = [];
    for (const f of m.params.callFrames) {
      if (frames.length === MAX_FRAMES) break;
      const script = scripts.get(f.location.scriptId);
      const url = (script && script.url) || f.url || "";
      if (!url.startsWith("file:")) continue;
      let file;
      try {
        file = fileURLToPath(url);
      } catch {
        continue;
      }
      frames.push({
        file,
        line: f.location.lineNumber + 1,
        column: (f.location.columnNumber ?? 0) + 1,
        module: script !== undefined && script.module,
      });
    }
    reply(frames, "");
    session.post("Debugger.resume", () => session.disconnect());
  });
  session.post("Debugger.enable", (err) => {
    if (err) return reply([], String(err.message));
    session.post("Debugger.pause");
  });
}

Atomics.store(shared, ALIVE, 1);
rescue();
`;

// Until it runs (and if it ends), every message goes out at once. Started from a callback, it once had
// the main thread wake Node's worker pool hundreds of times a second under load (ec1e816); measured again
// (2026-12-06), started once the imports are done, sessions16 and k32 were not told apart from it.
function rescuerRunning() {
  return atomicLoad(shared, ALIVE) === 1;
}
function startSecondThread() {
  try {
    const thread = new Worker(SECOND_THREAD, {
      eval: true,
      workerData: { shared, held: heldBytes, fd: OUT, every: RESCUE_MS, where: WHERE },
      resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 2 },
    });
    thread.unref();
    thread.on("error", (err) => complain("the host's second thread (it writes held answers, and says where a stopped host is held) failed", err));
    thread.on("exit", (code) => {
      atomicStore(shared, ALIVE, 0);
      say(`ovai host: the host's second thread (it writes held answers, and says where a stopped host is held) ended (code ${code})`);
    });
  } catch (err) {
    complain("the host's second thread (it writes held answers, and says where a stopped host is held) could not start", err);
  }
}

/**
 * JSON.stringify writes a lone surrogate (half of "😀") as an escape the daemon's JSON reader refuses,
 * which would lose the whole message: each becomes U+FFFD, as a well-formed string has it.
 */
const LONE_SURROGATE = /(?<!\\)((?:\\\\)*)\\u[dD][89a-fA-F][0-9a-fA-F]{2}/g;
function wellFormed(line) {
  if (!apply(includes, line, ["\\ud"]) && !apply(includes, line, ["\\uD"])) return line;
  return replaceEvery(line, LONE_SURROGATE, (m) => m[1] + "\\ufffd");
}

// What `pattern` (a /g RegExp of the host's own, which matches no empty text: either would loop for
// ever) matches in `text`, each replaced by `by(match)`. Not
// String.prototype.replace, which looks up RegExp.prototype[Symbol.replace] and exec as it runs: a
// plugin that patched them would read and rewrite other calls' answers on their way out.
function replaceEvery(text, pattern, by) {
  let out = "";
  let from = 0;
  pattern.lastIndex = 0;
  for (let m = regexpExec(pattern, text); m !== null; m = regexpExec(pattern, text)) {
    out += textSlice(text, from, m.index) + by(m);
    from = m.index + m[0].length;
  }
  return out + textSlice(text, from);
}

// process.exit from plugin code would end the host for every seat; it throws instead, so the call that
// made it is refused in words. The host itself leaves through the original.
const leaveWith = process.exit.bind(process);
function exitHost(code) {
  hostLeaving = true;
  leaveWith(code);
}
class PluginExit extends Error {
  constructor(code) {
    super(`process.exit(${code ?? ""}) was called`);
    this.code = code;
  }
}
process.exit = function exit(code) {
  throw new PluginExit(code);
};

// The other ways out cannot be stopped (a signal, an abort): they still end the host, but first say to
// the daemon which place in plugins/ asked, so the row that reports the host's end names it even when no
// call was in flight, from a timer. The host's own exit goes through reallyExit too.
let hostLeaving = false;
function endedBy(how) {
  let places = [];
  try {
    places = placesNow();
  } catch {
    // Whatever a plugin broke, the host still ends, and says so.
  }
  // Said to the daemon alone, under the host's key (a line on stderr is anybody's to write). Every place
  // in plugins/ goes, innermost first: the daemon blames the innermost file of plugins/ there, and the
  // next one out when that one is left out already.
  try {
    send({ t: "ended", how, places, key: hostKey }, true);
  } catch {
    // A host whose pipe is gone ends anyway.
  }
}

/**
 * The places in plugins/ on the stack now, innermost first (`plugins/REL:LINE:COLUMN`), read from V8's
 * call sites rather than the text of a stack a plugin can shape: code run by `eval` (which can name any
 * file in a sourceURL) is passed over. Empty when the stack cannot be read.
 */
function placesNow() {
  const places = [];
  if (!pluginsDir) return places;
  let sites = null;
  try {
    sites = sitesNow();
  } catch {
    // A stack too deep to read names no place.
  }
  if (!isArray(sites)) return places;
  for (let i = 0; i < sites.length && places.length < 32; i++) {
    try {
      const site = sites[i];
      if (siteIsEval(site)) continue;
      const file = siteFile(site);
      if (typeof file !== "string" || !startsWith(file, pluginsURL)) continue;
      // A file of plugins/ as the host imports it has no query or fragment: one with them is code a
      // plugin's own loader hook served under that file's name.
      if (textIndexOf(file, "?") >= 0 || textIndexOf(file, "#") >= 0) continue;
      push(places, placeOf(file, siteLine(site), siteColumn(site)));
    } catch {
      // A site that cannot be read names no place.
    }
  }
  return places;
}

/** A value a plugin passed, shown on one short line whatever it is. */
function shownArg(value) {
  try {
    return clip(replaceEvery(toText(value), /[\u0000-\u001f\u007f\u2028\u2029()]/g, () => "?"), 40);
  } catch {
    return "a value that cannot be shown";
  }
}
const reallyExitWith = process.reallyExit;
const abortProcess = process.abort;
const killWith = process.kill;
const ownPid = process.pid;
const signalNumbers = os.constants.signals;
// What a signal does when nothing listens: these end the process (the rest are ignored, stop it, or
// start the inspector).
const ENDING = new Set([
  "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGIOT", "SIGBUS", "SIGFPE", "SIGKILL",
  "SIGUSR2", "SIGSEGV", "SIGALRM", "SIGTERM", "SIGSTKFLT", "SIGXCPU", "SIGXFSZ", "SIGVTALRM", "SIGPROF",
  "SIGIO", "SIGPOLL", "SIGPWR", "SIGSYS",
]);
const setHas = uncurry(Set.prototype.has);
const listenersOf = uncurry(process.listenerCount);
/** The signal's name if sending it to the host ends it: it ends a process and nothing listens for it. */
function endingSignal(signal) {
  // As Node's own kill reads it: a signal that is not a number and not truthy is SIGTERM.
  let name = typeof signal !== "number" && !signal ? "SIGTERM" : signal;
  if (typeof name === "number") {
    name = null;
    for (const key of ownKeys(signalNumbers)) if (signalNumbers[key] === signal) name = key;
  }
  if (typeof name !== "string" || !setHas(ENDING, name)) return null;
  return listenersOf(process, name) === 0 ? name : null;
}
process.reallyExit = function reallyExit(code) {
  if (!hostLeaving) endedBy(`process.reallyExit(${code === undefined ? "" : shownArg(code)})`);
  return apply(reallyExitWith, process, [code]);
};
process.abort = function abort() {
  endedBy("process.abort()");
  return apply(abortProcess, process, []);
};
process.kill = function kill(pid, signal) {
  // Its own pid, or its process group (0, minus its pid), as Node reads a pid (a number, or a string
  // of one).
  let own = false;
  let sig = null;
  try {
    const n = typeof pid === "number" || typeof pid === "string" ? Number(pid) : NaN;
    own = n === ownPid || n === 0 || n === -ownPid;
    sig = own ? endingSignal(signal) : null;
  } catch {
    // An argument that cannot be read is Node's to refuse.
  }
  if (sig !== null) endedBy(`process.kill(${shownArg(pid)}, ${sig})`);
  return apply(killWith, process, arguments);
};

// The daemon gone means nobody can be answered: leave rather than linger as an orphan.
channel.on("close", () => exitHost(0));
channel.on("error", () => exitHost(0));

// An error a plugin leaves behind (a timer that throws after `run` answered, a promise nobody awaited)
// must not end the host for everybody; it goes to the log.
// A handler that throws would end the host: whatever a plugin has patched, these never do.
const logError = console.error;
const logTo = console;
function say(text) {
  // The host's own words go out on stderr, however deep in a plugin's stack they are said.
  speaking = true;
  try {
    // One line of stderr: the daemon reads it by lines, and a message's own newlines would split it.
    apply(logError, logTo, [replaceEvery(toText(text), /\r?\n|\r/g, () => "\\n")]);
  } catch {
    // Nothing is left to say it with.
  } finally {
    speaking = false;
  }
}
function complain(what, err) {
  say(`ovai host: ${what}: ${headline(err)}`);
}
/** Places already reported to the daemon for its log (each once a host), and how many at most. */
const strayPlaces = new Set();
const setAdd = uncurry(Set.prototype.add);
const setSize = uncurry(Object.getOwnPropertyDescriptor(Set.prototype, "size").get);
// The daemon writes a row for each of the first 16 places and one more saying it stops there
// (link.rs, MAX_STRAY_ROWS): it is sent a 17th place so that it can tell.
const MAX_STRAY_PLACES = 16;
/** What a plugin left behind, named by the place in plugins/ its stack says it came from, when it says. */
function complainOfPlugin(what, how, err) {
  let at = null;
  try {
    at = inPlugins(err);
  } catch {
    // A stack that cannot be read names no place.
  }
  complain(at === null ? what : `${what} (at ${at})`, err);
  // runtime.log gets each place once: a timer that throws every millisecond is one row, not a flood.
  // An error whose stack names no place (a socket's, a fetch's) is told apart by its words.
  let message = "";
  try {
    message = headline(err);
  } catch {
    // headline never throws; nothing is lost if it did.
  }
  const place = at ?? `?${textSlice(message, 0, 200)}`;
  if (setHas(strayPlaces, place) || setSize(strayPlaces) > MAX_STRAY_PLACES) return;
  setAdd(strayPlaces, place);
  try {
    send({ t: "stray", key: hostKey, how, message, at });
  } catch {
    // The daemon's stderr has it.
  }
}
process.on("uncaughtException", (err) => complainOfPlugin("a plugin threw outside a call", "threw", err));
/**
 * What an import threw, which `load` answers for: Node 20 also reports a CommonJS module's throw, as an ES
 * module imports it, as a promise left rejected (after the import's own catch ran), which no plugin did.
 */
const importThrew = new WeakSet();
const weakAdd = uncurry(WeakSet.prototype.add);
const weakHas = uncurry(WeakSet.prototype.has);
const isObject = (v) => (typeof v === "object" && v !== null) || typeof v === "function";
process.on("unhandledRejection", (err) => {
  // Looked at a turn later: the import's catch, if this is its error, has run by then.
  nextTurn(() => {
    if (isObject(err) && weakHas(importThrew, err)) return;
    complainOfPlugin("a plugin left a promise rejected", "rejected", err);
  });
});

// A line split over reads waits here (as bytes: a character may be split too) until its end arrives.
let partial = null;
let partialBytes = 0;
function keep(buf, start, end) {
  const need = partialBytes + end - start;
  if (partial === null || partial.length < need) {
    const size = partial === null ? READ_BYTES : partial.length * 2;
    const bigger = allocBytes(need > size ? need : size);
    if (partialBytes > 0) copyBytes(partial, bigger, 0, 0, partialBytes);
    partial = bigger;
  }
  copyBytes(buf, partial, partialBytes, start, end);
  partialBytes = need;
}

/** Whether the read being acted on has more after the current line. */
let reading = false;
function onBytes(n, reused) {
  // The buffer is reused: only its first n bytes are this read's.
  const buf = n === reused.length ? reused : subBytes(reused, 0, n);
  let start = 0;
  for (;;) {
    const end = indexOfByte(buf, 10, start);
    if (end < 0) break;
    let line;
    if (partialBytes > 0) {
      keep(buf, start, end);
      line = utf8Slice(partial, 0, partialBytes);
      partialBytes = 0;
      // A long line's buffer goes back to the collector.
      if (partial.length > READ_BYTES * 16) partial = null;
    } else {
      line = utf8Slice(buf, start, end);
    }
    start = end + 1;
    reading = start < n;
    if (waiting !== null) push(waiting, line);
    else if (!actOn(line)) startWaiting();
  }
  if (start < n) keep(buf, start, n);
  scheduleWaiting();
  reading = false;
}

// An async `run` settles in the microtasks that follow the current read. The lines after its call wait
// until it has answered (or for the next turn of the event loop, if it has more to wait for), so that its
// answer is made before any other plugin's code runs: one that blocks the event loop (and gets the host
// killed) then costs only the calls still waiting.
// Without a prototype, so an index setter a plugin puts on Array.prototype cannot take its lines.
let waiting = null;
/** The id of the call the waiting lines wait for (they go on when it ends, or at the next turn). */
let waitedFor;
let waitingAt = 0;
let waitScheduled = false;
function startWaiting() {
  waiting = [];
  setProto(waiting, null);
  waitingAt = 0;
}
function scheduleWaiting() {
  if (waiting !== null && waitingAt < waiting.length) {
    if (!waitScheduled) {
      nextTurn(actOnWaiting);
      waitScheduled = true;
    }
  }
  if (waiting !== null && waitingAt === waiting.length) waiting = null;
}
function actOnWaiting() {
  waitScheduled = false;
  goOnWaiting();
}
function goOnWaiting() {
  while (waiting !== null && waitingAt < waiting.length) {
    const line = waiting[waitingAt];
    waiting[waitingAt++] = undefined;
    if (!actOn(line)) break;
  }
  // Under steady load the queue may never run dry: what was acted on is let go of as it goes.
  if (waiting !== null && waitingAt >= 1024) {
    const rest = waiting;
    const from = waitingAt;
    startWaiting();
    for (let i = from; i < rest.length; i++) push(waiting, rest[i]);
  }
  scheduleWaiting();
}

/** Acts on one line; false when it started a call that has not answered yet. */
function actOn(line) {
  const id = onLine(line);
  if (id === undefined || !inFlight(id)) return true;
  waitedFor = id;
  return false;
}

function onLine(line) {
  let message;
  try {
    message = parse(line);
    // A field a message leaves out is looked up no further: a getter a plugin put on Object.prototype
    // would be run with the message itself, its key and arguments. A call (the many) carries every field
    // it is read for, and keeps the prototype V8 reads it fastest with.
    if (message !== null && typeof message === "object" && message.t !== "call") setProto(message, null);
  } catch {
    say(`ovai host: a protocol line is not JSON: ${textSlice(line, 0, 200)}`);
    return;
  }
  switch (message.t) {
    case "init":
      root = message.root;
      pluginsDir = message.pluginsDir;
      pluginsURL = pathToFileURL(pluginsDir).href + "/";
      config = deepFreeze(message.config ?? {});
      maxAnswerBytes = message.maxAnswerBytes ?? maxAnswerBytes;
      hostKey = message.key ?? 0;
      boxed = message.boxed === true;
      // The root's folders as the host starts: the box lets plugins write in those (not in one made later).
      if (boxed) {
        try {
          rootFolders = new SetCtor(readdirSync(root));
        } catch {}
      }
      if (isArray(message.unread) && message.unread.length > 0) guardUnread(message.unread);
      if (message.rescuerFirst === true) secondThreadNow();
      break;
    case "load":
      loadCounted(message);
      break;
    case "call":
      secondThreadNow();
      call(message);
      return message.id;
    case "cancel":
      if (inFlight(message.id)) {
        const running = mapGet(calls, message.id);
        settle(message.id);
        // Named as Node's own reasons are, so `err.name === "AbortError"` (or "TimeoutError") holds.
        running.abort(new DOMExceptionCtor(toText(message.why ?? "the call was cancelled"), message.timeout === true ? "TimeoutError" : "AbortError"));
      }
      break;
    case "ping":
      send({ t: "pong", n: message.n, key: hostKey });
      break;
    default:
      say(`ovai host: unknown message ${stringify(message.t)}`);
  }
}

// A host started after a tool's file changed imports that file not at all (the daemon refuses its
// calls), and a hook refuses it to any file that imports it, naming it: a new host runs no tool's code
// nobody read. Hooks came in Node 18.19 and 20.6; before them such an import goes through.
const registerHooks = nodeModule.register;
const UNREAD_HOOKS = `
let unread = {};
export function initialize(data) { unread = data; }
export async function load(url, context, next) {
  const bare = url.split("?")[0].split("#")[0];
  if (Object.hasOwn(unread, bare)) {
    throw new Error("it imports " + unread[bare] + ", which changed after it was read, and a new host imports only what was read");
  }
  return next(url, context);
}`;
function guardUnread(files) {
  if (typeof registerHooks !== "function") return;
  const urls = { __proto__: null };
  for (const file of files) {
    if (typeof file !== "string") continue;
    const shown = "plugins/" + pathRelative(pluginsDir, file);
    urls[pathToFileURL(file).href] = shown;
    // Node imports a linked file under the path it leads to.
    try {
      urls[pathToFileURL(fs.realpathSync(file)).href] = shown;
    } catch {
      // Gone since: nothing imports it.
    }
  }
  try {
    registerHooks("data:text/javascript," + encodeURIComponent(UNREAD_HOOKS), { data: { ...urls } });
  } catch (err) {
    complain("the guard that keeps files changed since the last read from being imported could not be set", err);
  }
  guardRequire(urls);
}

// require() of such a file (createRequire, then require("./echo.mjs")) meets the load hook's refusal
// as Node's own internal assertion: it is refused before, in the hook's words.
function guardRequire(urls) {
  const load = nodeModule._load;
  const resolve = nodeModule._resolveFilename;
  if (typeof load !== "function" || typeof resolve !== "function") return;
  const paths = { __proto__: null };
  const keys = ownKeys(urls);
  for (let i = 0; i < keys.length; i++) {
    try {
      paths[fileURLToPath(keys[i])] = urls[keys[i]];
    } catch {
      // Not a file URL: nothing requires it.
    }
  }
  nodeModule._load = function _load(request, parent, isMain) {
    let filename = null;
    try {
      filename = apply(resolve, nodeModule, [request, parent, isMain]);
    } catch {
      // Node's own load says what is wrong with it.
    }
    if (typeof filename === "string" && hasOwn(paths, filename)) {
      throw new ErrorCtor(
        "it requires " + paths[filename] + ", which changed after it was read, and a new host imports only what was read",
      );
    }
    return apply(load, this, [request, parent, isMain]);
  };
}

// What a plugin prints (console.log, process.stdout.write) goes to the daemon under the host's key with
// the file whose code printed it (the first place in plugins/ on the stack, outside node_modules when
// there is one): the operator's log names the plugin, a flood of one file is counted apart from
// another's lines, and a line left without its end is never glued to another file's. What names no
// file (Node's own warnings, the host's words) goes out on the stream as before.
const PRINTED_LINES_PER_S = 100;
const PRINTED_LINE_CHARS = 4096;
const clock = Date.now;
const later = setTimeout;
const isView = ArrayBuffer.isView;
/** For each stream and file: its second, the lines logged and dropped in it, a line not ended yet. */
const printed = { __proto__: null };
let printedTimer = null;

function printingFile() {
  if (pluginsURL === "") return null;
  // From V8's call sites, not the stack's text, which a plugin shapes (prepareStackTrace, a sourceURL).
  const places = placesNow();
  if (places.length === 0) return null;
  let chosen = places[0];
  for (let i = 0; i < places.length; i++) {
    if (!apply(includes, places[i], ["/node_modules/"])) {
      chosen = places[i];
      break;
    }
  }
  // `plugins/REL:LINE:COLUMN` without its place.
  const column = textLastIndexOf(chosen, ":");
  const line = textLastIndexOf(chosen, ":", column - 1);
  return line > 0 ? textSlice(chosen, 0, line) : chosen;
}

/** At most this many lines a second from all files together, and this many files told apart. */
const PRINTED_ALL_PER_S = 1000;
const PRINTED_FILES = 256;
/** This second's lines from all files, and those dropped without their file looked up. */
const printedAll = { __proto__: null, second: 0, lines: 0, dropped: { __proto__: null, stdout: 0, stderr: 0 } };

/** A file's state, or the unnamed one's ("") once PRINTED_FILES files are told apart. */
function printedState(stream, file) {
  if (file !== "" && printed[stream + "\0" + file] === undefined && ownKeys(printed).length >= PRINTED_FILES) {
    file = "";
  }
  const key = stream + "\0" + file;
  let p = printed[key];
  if (p === undefined) {
    p = { __proto__: null, stream, file, second: clock(), lines: 0, dropped: 0, partial: "", full: false, since: 0, cut: 0 };
    printed[key] = p;
  }
  return p;
}

/** Whether this second still takes a line from any file; past that, it is counted, unnamed. */
function printedRoom(stream) {
  const now = clock();
  if (now - printedAll.second >= 1000) rollAll(now);
  if (printedAll.lines >= PRINTED_ALL_PER_S) {
    printedAll.dropped[stream]++;
    schedulePrinted();
    return false;
  }
  return true;
}

function rollAll(now) {
  rollAllOf("stdout");
  rollAllOf("stderr");
  printedAll.second = now;
  printedAll.lines = 0;
}

function rollAllOf(stream) {
  if (printedAll.dropped[stream] === 0) return;
  try {
    send({ t: "out", key: hostKey, file: "*", stream, dropped: printedAll.dropped[stream] });
  } catch {
    // The protocol channel is gone: the host is ending.
  }
  printedAll.dropped[stream] = 0;
}

// Where to cut a text to at most `n` UTF-16 units without splitting a character's surrogate pair (its
// halves would be sent and counted as two U+FFFDs).
function cutAt(text, n) {
  if (n <= 0 || n >= text.length) return n;
  const last = charCodeAt(text, n - 1);
  return last >= 0xd800 && last <= 0xdbff ? n - 1 : n;
}

function printedLine(p, text) {
  // Bytes of the line cut off while it was held without its end: said with what is kept of it.
  let cut = p.cut;
  p.cut = 0;
  const now = clock();
  if (now - p.second >= 1000) rollPrinted(p, now);
  if (p.lines >= PRINTED_LINES_PER_S) {
    p.dropped++;
    schedulePrinted();
    return;
  }
  p.lines++;
  printedAll.lines++;
  const end = text.length > 0 && charCodeAt(text, text.length - 1) === 13 ? text.length - 1 : text.length;
  const kept = cutAt(text, min(end, PRINTED_LINE_CHARS));
  try {
    if (end > kept) cut += byteLength(textSlice(text, kept, end));
    send({ t: "out", key: hostKey, file: p.file, stream: p.stream, text: textSlice(text, 0, kept), cut });
  } catch {
    // As above.
  }
}

function rollPrinted(p, now) {
  sendDropped(p);
  p.second = now;
  p.lines = 0;
}

/** Says how many of a file's lines its flood dropped, if any, and counts afresh. */
function sendDropped(p) {
  if (p.dropped === 0) return;
  try {
    send({ t: "out", key: hostKey, file: p.file, stream: p.stream, dropped: p.dropped });
  } catch {
    // As above.
  }
  p.dropped = 0;
}

/** Each second: a line left without its end for a second is let go, and what floods dropped is counted. */
function schedulePrinted() {
  if (printedTimer !== null) return;
  printedTimer = later(() => {
    printedTimer = null;
    const now = clock();
    let more = false;
    const keys = ownKeys(printed);
    for (let i = 0; i < keys.length; i++) {
      const p = printed[keys[i]];
      if (p.partial !== "") {
        if (now - p.since >= 1000) {
          const text = p.partial;
          p.partial = "";
          p.full = false;
          printedLine(p, text);
        } else more = true;
      }
      if (p.dropped > 0) {
        if (now - p.second >= 1000) rollPrinted(p, now);
        else more = true;
      }
    }
    if (printedAll.dropped.stdout + printedAll.dropped.stderr > 0) {
      if (now - printedAll.second >= 1000) rollAll(now);
      else more = true;
    }
    if (more) schedulePrinted();
  }, 1000);
}

/** Lets every line left without its end go now: a file's import is reported after what it printed. */
function letPartialsGo() {
  const keys = ownKeys(printed);
  for (let i = 0; i < keys.length; i++) {
    const p = printed[keys[i]];
    if (p.partial !== "") {
      const text = p.partial;
      p.partial = "";
      p.full = false;
      printedLine(p, text);
    }
  }
}

/** What floods dropped so far, counted now rather than at the second's end. */
function countDropped() {
  const keys = ownKeys(printed);
  for (let i = 0; i < keys.length; i++) sendDropped(printed[keys[i]]);
  rollAllOf("stdout");
  rollAllOf("stderr");
}

/** A file's import reported, after what it printed and how much of that was dropped (an `ovai check`
 * ends at the report). */
function sendLoaded(message) {
  letPartialsGo();
  countDropped();
  send(message);
}

function capturePrinted(stream, name) {
  const original = stream.write;
  stream.write = function write(chunk, encoding, callback) {
    if (speaking || pluginsURL === "") return apply(original, stream, [chunk, encoding, callback]);
    const done = typeof encoding === "function" ? encoding : callback;
    // A flood past what the log takes is counted before its file is looked up: looking costs a stack.
    if (!printedRoom(name)) {
      if (typeof done === "function") nextTurn(done);
      return true;
    }
    // What names no file (a promise job's console.log, a Worker, a frozen Error) goes to the daemon too,
    // unnamed: never onto the host's own stream, where it would read as the host's last words.
    const file = printingFile();
    const p = printedState(name, file === null ? "" : file);
    let text;
    if (typeof chunk === "string") {
      text =
        typeof encoding === "string" && encoding !== "utf8" && encoding !== "utf-8"
          ? utf8Slice(bytesOf(chunk, encoding), 0, byteLength(chunk, encoding))
          : chunk;
    } else if (isView(chunk)) {
      text = utf8Slice(bytesOf(chunk.buffer, chunk.byteOffset, chunk.byteLength), 0, chunk.byteLength);
    } else text = toText(chunk);
    let start = 0;
    for (;;) {
      const end = textIndexOf(text, "\n", start);
      if (end < 0) break;
      // A held line already cut takes nothing more (a character of the rest would follow the cut).
      const rest = textSlice(text, start, end);
      const line = p.full ? p.partial : p.partial + rest;
      // The line's end (a CR before the LF) is no part of what was cut.
      const crlf = rest.length > 0 && charCodeAt(rest, rest.length - 1) === 13;
      if (p.full) p.cut += byteLength(crlf ? textSlice(rest, 0, rest.length - 1) : rest);
      p.partial = "";
      p.full = false;
      printedLine(p, line);
      start = end + 1;
    }
    if (start < text.length) {
      const whole = p.full ? p.partial : p.partial + textSlice(text, start);
      if (p.full) p.cut += byteLength(textSlice(text, start));
      const kept = cutAt(whole, PRINTED_LINE_CHARS);
      if (whole.length > kept) {
        p.cut += byteLength(textSlice(whole, kept));
        p.full = true;
      }
      p.partial = textSlice(whole, 0, kept);
      p.since = clock();
      schedulePrinted();
    }
    if (typeof done === "function") nextTurn(done);
    return true;
  };
}
capturePrinted(process.stdout, "stdout");
capturePrinted(process.stderr, "stderr");

send({ t: "ready", v: PROTOCOL, node: process.version, pid: process.pid });

// The second thread costs about 40 ms of CPU as it starts, which slowed the imports of a restart by a
// third: it starts once they are done (or at the first call), unless the daemon asks for it first (a
// host before this one was held in an import, and the thread is what says where).
let secondThreadAsked = false;
let loadsRunning = 0;
function secondThreadNow() {
  if (secondThreadAsked) return;
  secondThreadAsked = true;
  startSecondThread();
}
async function loadCounted(message) {
  loadsRunning++;
  try {
    await load(message);
  } finally {
    if (--loadsRunning === 0) secondThreadNow();
  }
}

const EXPORTS = [
  ["description", "string"],
  ["inputSchema", "object"],
  ["run", "function"],
];

async function load({ id, name, file, key }) {
  let ns;
  try {
    ns = await import(pathToFileURL(file).href);
  } catch (err) {
    if (isObject(err)) weakAdd(importThrew, err);
    sendLoaded({ t: "loaded", id, key, ok: false, import: importFailure(err, file) });
    return;
  }
  const missing = [];
  const wrong = [];
  const values = {};
  for (const [exported, want] of EXPORTS) {
    let value;
    try {
      value = ns[exported];
    } catch (err) {
      // An export still in its temporal dead zone (a cycle of imports) reads as a ReferenceError.
      sendLoaded({ t: "loaded", id, key, ok: false, import: importFailure(err, file) });
      return;
    }
    const unlike = value === undefined ? null : unlikeWanted(value, want);
    if (value === undefined) {
      missing.push(exported);
    } else if (unlike !== null) {
      wrong.push({ __proto__: null, name: exported, is: unlike.is, want: unlike.want });
    } else {
      values[exported] = value;
    }
  }
  const emptyDescription = typeof values.description === "string" && values.description.trim() === "";
  if (missing.length || wrong.length || emptyDescription) {
    sendLoaded({
      t: "loaded",
      id,
      key,
      ok: false,
      exports: {
        missing,
        wrong,
        emptyDescription,
        hasDefault: "default" in ns && ns.default !== undefined,
        others: otherExports(ns),
      },
    });
    return;
  }
  let schemaText;
  let nonFinite = null;
  try {
    // JSON writes Infinity and NaN as null: a bound the author wrote would reach the checker as null.
    // The objects that are some schema's `properties`: an input there left undefined is a slip.
    const propertiesOf = new MapCtor();
    schemaText = stringify(values.inputSchema, function (name, value) {
      if (name === "properties" && value !== null && typeof value === "object") mapSet(propertiesOf, value, true);
      // `properties: { a: shapes.a }` with `shapes.a` misspelt: JSON leaves `a` out (or sends null in an
      // array), and the schema says nothing of it. Elsewhere (`default: opts.def`) a member left out
      // changes nothing, and the schema is served as it was (helper-98).
      if (nonFinite === null && value === undefined && (isArray(this) || name === "type" || mapGet(propertiesOf, this) === true)) {
        const inArray = isArray(this);
        const as = inArray ? `item ${clip(toText(name), 16)} of an array` : clip(toText(name), 64);
        nonFinite = `it holds undefined (as ${as}), which JSON would ${inArray ? "send as null" : "leave out"}: give it a value (a name it comes from may be misspelt), or leave it out`;
      }
      if (nonFinite === null && typeof value === "number" && !Number.isFinite(value)) {
        nonFinite = `it holds ${toText(value)} (as ${clip(toText(name), 64)}), which JSON would send as null: leave it out, or give a number`;
      }
      // A zod schema inside (the MCP SDK's raw shape, { name: z.string() }, or one in properties) would
      // go out as its internals, its description and bounds lost.
      if (nonFinite === null && isZod(value)) {
        nonFinite =
          `it holds a zod schema (as ${clip(toText(name), 64)}), not JSON Schema: write the whole schema as JSON Schema, ` +
          `z.toJSONSchema(z.object({ ... }), { io: "input" }) in zod 4 (zodToJsonSchema before)`;
      }
      // `type: String` (Vue's props, mongoose): JSON leaves a function out, and the check with it.
      if (nonFinite === null && typeof value === "function") {
        const type = mapGet(typeNames, value);
        const as = clip(toText(name), 64);
        // `type: String`, or a property written as its type alone (`{ a: String }`, Vue's shorthand).
        const way = type === undefined ? "a schema holds only JSON values" : name === "type" ? `write the type as a string, such as "${type[1]}"` : `write its schema, such as { type: "${type[1]}" }`;
        nonFinite = `it holds a function (${type === undefined ? "" : `${type[0]}, `}as ${as}), which JSON would leave out: ${way}`;
      }
      // `maximum: 10n`: JSON cannot write a BigInt, and V8's words for it name no place.
      if (typeof value === "bigint") {
        if (nonFinite === null) {
          nonFinite = `it holds the BigInt ${clip(toText(value), 40)}n (as ${clip(toText(name), 64)}), which JSON cannot write: give a number, such as ${clip(toText(value), 40)}`;
        }
        return null;
      }
      // `pattern: /^[a-z]+$/`: JSON writes a RegExp as {}.
      if (nonFinite === null && value instanceof RegExpCtor) {
        nonFinite = `it holds a RegExp (as ${clip(toText(name), 64)}), which JSON would send as {}: write the pattern as a string, such as ${stringify(clip(toText(value.source), 60))}`;
      }
      return value;
    });
  } catch (err) {
    // V8's words for a cycle run over several lines: said in one, with the way out.
    const circle = err instanceof TypeError ? regexpExec(/property '([^']*)' closes the circle/, err.message) : null;
    const why = circle !== null
      ? `it holds itself (its property '${clip(circle[1], 64)}' closes the circle): put the part that repeats in $defs and point to it with {"$ref": "#/$defs/..."}`
      : headline(err);
    sendLoaded({ t: "loaded", id, key, ok: false, schemaJson: why });
    return;
  }
  if (nonFinite !== null) {
    sendLoaded({ t: "loaded", id, key, ok: false, schemaJson: nonFinite });
    return;
  }
  // A tool's entry goes out on every tools/list: one larger than an answer may be is refused here, in
  // words, rather than sent as a line the daemon cannot take.
  const bytes = byteLength(values.description) + byteLength(schemaText);
  if (bytes > maxAnswerBytes) {
    sendLoaded({ t: "loaded", id, key, ok: false, tooBig: bytes });
    return;
  }
  // A line the daemon reads nests at most 128 deep: a schema past that would not reach it at all.
  const depth = nesting(schemaText);
  if (depth > MAX_SCHEMA_DEPTH) {
    sendLoaded({ t: "loaded", id, key, ok: false, tooDeep: depth });
    return;
  }
  tools[name] = freeze({ __proto__: null, file, run: values.run });
  sendLoaded({ t: "loaded", id, key, ok: true, description: values.description, inputSchema: parse(schemaText) });
}

/**
 * What an export is where it is not what its name wants, `{ is, want }`; null where it is. A class is
 * no function to call, and a schema is a plain object: one of a class (zod's `z.object()`, whose own
 * `type` is "object") would be written as JSON as its fields, which describe no input.
 */
function unlikeWanted(value, want) {
  if (kind(value) !== want) return { is: kindWithArticle(value), want: article(want) };
  try {
    // `class x {` or `class {`, never a method called class (`class() {`).
    if (want === "function" && regexpExec(/^class[\s{]/, functionText(value)) !== null) {
      return { is: "a class", want: "a function" };
    }
    // `async function* run`: each call would answer an iterator, never its { text }.
    if (want === "function" && regexpExec(/^(?:async\s*)?function\s*\*/, functionText(value)) !== null) {
      return { is: "a generator function", want: "a function that returns its answer (an async one may await)" };
    }
    if (want === "object") {
      const proto = prototypeOf(value);
      const name = proto === null || proto === plainPrototype ? "Object" : proto.constructor?.name;
      // "Object" of another realm (a `vm` context's) is a plain object too, and an object that writes
      // itself as JSON (`toJSON`) is what it writes.
      if (name !== "Object" && typeof value.toJSON !== "function") {
        const is = typeof name === "string" && name !== "" ? article(clip(name, 40)) : "an object of a class";
        return { is, want: "a JSON schema written as a plain object" };
      }
    }
  } catch {
    // A proxy or a getter of the plugin's that throws: taken as it is, and judged as JSON later.
  }
  return null;
}

/** How deep a schema may nest as JSON (its objects and arrays): the daemon reads it in a line. */
const MAX_SCHEMA_DEPTH = 100;

/** How deep JSON text nests its objects and arrays. */
function nesting(text) {
  let depth = 0;
  let most = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = charCodeAt(text, i);
    if (inString) {
      if (c === 92) i++;
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 || c === 91) {
      depth++;
      if (depth > most) most = depth;
    } else if (c === 125 || c === 93) depth--;
  }
  return most;
}

/** A few of the module's other export names, clipped: the daemon looks among them for a misspelling. */
function otherExports(ns) {
  const others = [];
  for (const key of ownKeys(ns)) {
    if (typeof key !== "string" || key === "default") continue;
    if (key === "description" || key === "inputSchema" || key === "run") continue;
    push(others, clip(key, 64));
    if (others.length === 32) break;
  }
  return others;
}

// Every answer and progress report carries the call's key, which the daemon checks: a plugin writing to
// fd 4 by hand cannot answer another call, since it never sees a key.
async function call({ id, tool, args, seat, role, progress, key, traceparent }) {
  try {
    const entry = tool in tools ? tools[tool] : undefined;
    if (entry === undefined) {
      send({ t: "answer", id, key, unknown: true });
      return;
    }
    const running = new Running();
    if (typeof traceparent === "string") running.traceparent = traceparent;
    mapSet(calls, id, running);
    const report = progress === true ? progressOf(id, key) : noProgress;
    let answer;
    try {
      answer = entry.run(args ?? {}, freeze(new Context(seat, role, running, report)));
      // A synchronous answer goes out now; only a promise is waited for.
      if (isThenable(answer)) answer = await answer;
    } catch (err) {
      if (!answering(id)) return;
      let message;
      try {
        message =
          err instanceof PluginExit
            ? { t: "answer", id, key, exited: toText(err.code ?? "") }
            : { t: "answer", id, key, threw: thrown(err, entry.file) };
      } catch {
        // Describing the error failed (a plugin patched what that takes): still an answer.
        message = { t: "answer", id, key, threw: { message: "an error that cannot be shown", at: null } };
      }
      send(message);
      return;
    }
    // A call the daemon gave up on (cancelled, past its deadline) was answered already.
    if (!answering(id)) return;
    let message;
    try {
      message = shape(id, answer);
    } catch (err) {
      // A Proxy or a throwing getter: the answer cannot even be looked at. Still an answer, in words.
      message = { t: "answer", id, bad: `something that cannot be read (${headline(err)})` };
    }
    if (typeof message === "string") {
      // The common answer, written by hand: its one string is the only part JSON.stringify need escape.
      const keyed = key === undefined ? "" : `,"key":${stringify(key)}`;
      sendLine(wellFormed(`{"t":"answer","id":${stringify(id)}${keyed},${message}}`));
      return;
    }
    // The key right after the id, where the daemon finds it in an answer that junk on fd 4 broke.
    send({ t: "answer", id, key, ...message });
  } finally {
    // The lines waiting for this call go on now, not through its promise's `then`, which a plugin can
    // reach (Promise[Symbol.species]).
    if (waitedFor === id) {
      waitedFor = undefined;
      goOnWaiting();
    }
  }
}

/**
 * Whether `run` answered with a promise (or another thenable) to wait for. A `then` a plain object only
 * inherits is a patch of Object.prototype, not an answer still coming.
 */
function isThenable(value) {
  if (value === null || (typeof value !== "object" && typeof value !== "function")) return false;
  // Neither `instanceof` (Promise[Symbol.hasInstance]) nor reading an inherited `then` (a getter on
  // Object.prototype): both would hand a plugin's patch every other call's answer.
  if (isPromise(value)) return true;
  if (protoOf(value) === ObjectProto && !hasOwn(value, "then")) return false;
  return typeof value.then === "function";
}

/**
 * A call in flight, and its AbortSignal once somebody asks for it. Node's AbortController is costly to
 * make (an EventTarget, maps, new object shapes, garbage for the collector): it is made when a plugin
 * first reads `signal`, already aborted if the call was cancelled before that.
 */
class Running {
  controller = null;
  reason = undefined;
  aborted = false;
  /** The call's W3C trace context, or null: what `context.traceparent` gives. */
  traceparent = null;
  signal() {
    if (this.controller === null) {
      this.controller = new AbortCtl();
      if (this.aborted) abortWith(this.controller, this.reason);
    }
    return signalOf(this.controller);
  }
  abort(reason) {
    if (this.controller !== null) abortWith(this.controller, reason);
    else {
      this.aborted = true;
      this.reason = reason;
    }
  }
}
freeze(Running.prototype);

/**
 * What `run` gets as its second argument. Own fields, frozen, over a frozen prototype with nothing on it
 * but `signal` (not even Object.prototype): nothing a plugin patches reaches another call's context. A
 * class rather than a null-prototype literal, which V8 keeps as a slow dictionary.
 */
class Context {
  #running;
  constructor(seat, role, running, progress) {
    this.seat = seat;
    this.role = role;
    this.root = root;
    this.config = config;
    this.progress = progress;
    this.#running = running;
  }
  get signal() {
    return this.#running.signal();
  }
  /** The call's W3C trace context (`00-…`), for the plugin's own requests to pass on; null when none. */
  get traceparent() {
    return this.#running.traceparent;
  }
}
delete Context.prototype.constructor;
Object.setPrototypeOf(Context.prototype, null);
freeze(Context.prototype);

/** Progress when the caller asked for none: a plugin may report unconditionally. */
function noProgress() {}

/** At most one progress report per call in this long; the latest waiting one wins. */
const PROGRESS_EVERY_MS = 100;

/** A progress message as text: a plain object (`{ pct: 50 }`) as its JSON, not "[object Object]". */
function messageText(message) {
  const text = toText(message);
  if (typeof message === "object" && text === "[object Object]") {
    try {
      const json = stringify(message);
      if (typeof json === "string") return json;
    } catch {
      // Cyclic, or a toJSON that throws: said as String says it.
    }
  }
  return text;
}

/**
 * `context.progress(message, { progress, total })` for one call: reports go to the daemon (which passes
 * them on as notifications/progress) while the call is in flight, coalesced, never after its answer.
 */
function progressOf(id, key) {
  let last = 0;
  let pending = null;
  let timer = null;
  const flush = () => {
    timer = null;
    mapDelete(heldReports, id);
    if (pending !== null && inFlight(id)) {
      // Made text only when it goes out: a plugin reporting in a tight loop pays for the ones sent.
      if (pending.message !== undefined) {
        try {
          pending.message = clip(messageText(pending.message), 1000);
        } catch {
          delete pending.message;
        }
      }
      // Paced already, and the daemon passes on only the latest of the reports it reads together: each
      // goes out at once.
      send(pending, true);
      last = Date.now();
    }
    pending = null;
  };
  return function progress(message, options) {
    if (!inFlight(id)) return;
    try {
      // As the MCP SDKs shape a report (`{ progress, total, message }`), or as bare numbers
      // (`progress(3, 10)`): read for what they are, not as a message "[object Object]" or "3".
      if (
        options === undefined &&
        message !== null &&
        typeof message === "object" &&
        !isArray(message) &&
        ("progress" in message || "total" in message)
      ) {
        options = message;
        message = options.message;
      } else if (typeof message === "number") {
        options = { progress: message, total: typeof options === "number" ? options : options?.total };
        message = undefined;
      }
      const report = { __proto__: null, t: "progress", id, key };
      if (message !== undefined && message !== null) report.message = message;
      const done = options?.progress;
      const total = options?.total;
      if (typeof done === "number" && Number.isFinite(done)) report.progress = done;
      if (typeof total === "number" && Number.isFinite(total)) report.total = total;
      pending = report;
    } catch {
      return;
    }
    const wait = last + PROGRESS_EVERY_MS - Date.now();
    if (wait <= 0) flush();
    else if (timer === null) {
      timer = setTimeout(flush, wait);
      mapSet(heldReports, id, flush);
    }
  };
}

/**
 * The answer as the protocol carries it: `"text":…` or `"refused":…` (the fields of the common answer,
 * as JSON), or a message saying what was answered instead.
 */
function shape(id, answer) {
  if (answer !== null && typeof answer === "object" && !isArray(answer)) {
    const keys = ownKeys(answer);
    let key = null;
    let value;
    if (keys.length === 1) {
      key = keys[0];
      value = answer[key];
    } else if (keys.length <= 8) {
      // A key holding undefined is no key, as in JSON: `{ text, refused: cond ? why : undefined }`.
      for (let i = 0; i < keys.length; i++) {
        const v = answer[keys[i]];
        if (v === undefined) continue;
        if (key !== null) {
          key = null;
          break;
        }
        key = keys[i];
        value = v;
      }
    }
    if (key === "text" || key === "refused") {
      if (typeof value === "string") {
        // Measured as sent, escapes and all: that is what the daemon holds for a session until it reads.
        // Within the cap as three bytes a UTF-16 unit, it is within it as UTF-8.
        const json = stringify(value);
        if ((json.length - 2) * 3 > maxAnswerBytes) {
          const sent = byteLength(json) - 2;
          if (sent > maxAnswerBytes) {
            return { t: "answer", id, tooBig: byteLength(value), asSent: sent, refusal: key === "refused" };
          }
        }
        return `"${key}":${json}`;
      }
    }
  }
  return { t: "answer", id, bad: describe(answer) };
}

/** What a handler answered instead of { text } or { refused }, in words. */
function describe(value) {
  if (value === undefined) return "undefined";
  if (value === null) return "null";
  switch (typeof value) {
    case "string":
      return `the string ${stringify(clip(value, 60))}`;
    case "number":
    case "boolean":
    case "bigint":
      return `the ${typeof value} ${toText(value)}`;
    case "function":
      return "a function";
    case "symbol":
      return "a symbol";
  }
  if (isArray(value)) return "an array";
  if (value instanceof ErrorCtor) return `an error (${headline(value)})`;
  const named = namedObject(value);
  if (named !== null) return named;
  let keys = ownKeys(value);
  // A key holding undefined is no key, as in JSON (unless it is all there is). No getter is run.
  const defined = keys.filter((k) => {
    const own = getOwn(value, k);
    return !(own !== undefined && hasOwn(own, "value") && own.value === undefined);
  });
  if (defined.length === 0 && keys.length > 1) return "an object whose keys all hold undefined";
  if (defined.length > 0) keys = defined;
  if (keys.length === 0) {
    // `in` reads no getter: what the object only inherits is named, and why it does not count.
    if ("text" in value || "refused" in value) return "an object whose text or refused is inherited, not its own";
    if (asyncIterator in value) return "an async iterator (is run an async generator?)";
    if (iterator in value) return "an iterator (is run a generator?)";
    return "an empty object";
  }
  if (keys.includes("text") && keys.includes("refused")) return "an object with both text and refused";
  if (keys.length === 1 && (keys[0] === "text" || keys[0] === "refused")) {
    const held = value[keys[0]];
    // `{ refused: new Error("no access") }`: its words are shown, so the caller still reads them.
    if (held instanceof ErrorCtor) return `{ ${keys[0]} } holding an error (${headline(held)}), not a string`;
    // `{ text: fetchText() }`: the await left out.
    // No `instanceof` (a plugin's Symbol.hasInstance would see another plugin's answer).
    if (isPromise(held)) return `{ ${keys[0]} } holding a Promise (an await left out?), not a string`;
    // A Date, a Map, a Buffer… named for what it is (one level: never an object's own keys again).
    const named = namedObject(held);
    if (named !== null) return `{ ${keys[0]} } holding ${named}, not a string`;
    return `{ ${keys[0]} } holding ${kindWithArticle(held)}, not a string`;
  }
  // A key may be megabytes long: each is shown clipped, five at most.
  const some = (names) => joinWith(names.slice(0, 5).map((k) => clip(k, 64)), ", ") + (names.length > 5 ? ", …" : "");
  const shown = some(keys);
  // An MCP server's own answer (the SDK's examples write it so), a refusal of it (`isError`) included.
  const content = getOwn(value, "content");
  if (content !== undefined && isArray(content.value)) return "MCP's { content: [...] }, which ovai makes itself from { text } (text only)";
  const answerKey = keys.includes("text") ? "text" : keys.includes("refused") ? "refused" : null;
  if (answerKey !== null) {
    const beside = some(keys.filter((k) => k !== answerKey));
    return `{ ${answerKey} } with ${beside} beside it, which an answer does not have`;
  }
  return `an object with ${keys.length === 1 ? "the key" : "the keys"} ${shown}`;
}

/** A thrown value, as the caller is told: the error's first line and where in the plugins it was. */
function thrown(err, file) {
  const said = withNotes({ message: headline(err), at: location(err, file) }, err);
  // context.config is frozen: changing it throws words that name no setting (read by their words: an
  // `instanceof` would run a plugin's Symbol.hasInstance on another's error).
  if (regexpExec(/^TypeError: (?:.*object is not extensible|Cannot assign to read only property|Cannot delete property)/, said.message) !== null) {
    said.frozen = true;
  }
  return said;
}

/** A thrown error's words, with what the daemon may add to them: the box's part, names not passed. */
function withNotes(said, err) {
  const box = boxCause(err);
  if (box !== null) said.box = box;
  const names = envNamed(said.message);
  if (names.length > 0) said.envUnset = names;
  return said;
}

/**
 * The environment variables an error's words name (`set GITHUB_TOKEN first`: names with an underscore,
 * as such names are written) that the host did not start with, eight at most.
 */
function envNamed(text) {
  const names = [];
  const name = /\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b/g;
  for (let m = regexpExec(name, text); m !== null && names.length < 8; m = regexpExec(name, text)) {
    let again = setHas(startEnv, m[0]);
    for (let i = 0; i < names.length && !again; i++) again = names[i] === m[0];
    if (!again) push(names, m[0]);
  }
  return names;
}

/**
 * What of the box an error (or one of its causes) may have met, for the daemon to say so: "tmp" for a
 * file not found in a temporary folder (the machine's is not the box's), "socket" for a Unix socket
 * refused, "readonly" for a write to what the box keeps read-only, "late:NAME" for one in the root's
 * folder NAME made after the host started (the box lets plugins write in those there then), "git" for a
 * program meeting the read-only .git/. Null for anything else, or outside the box. Only own data
 * properties are read.
 */
function boxCause(err) {
  if (!boxed) return null;
  let at = err;
  for (let i = 0; i < 4 && at !== null && typeof at === "object"; i++) {
    try {
      const own = (key) => {
        const d = getOwn(at, key);
        return d !== undefined && hasOwn(d, "value") ? d.value : undefined;
      };
      const code = own("code");
      const path = own("path");
      if (code === "ENOENT" && typeof path === "string" && !startsWith(path, `${root}/`)) {
        // A loop, not `some`: a plugin may have patched Array.prototype.
        for (let d = 0; d < tempDirs.length; d++) if (startsWith(path, tempDirs[d])) return "tmp";
      }
      // A write where the box keeps things read-only: the root's own files, .git/, what agents read, and
      // the root's folders made since the host started.
      if (code === "EROFS") {
        // A relative path is the root's: the host runs there.
        const full = typeof path === "string" ? resolvePath(root, path) : "";
        const top = startsWith(full, `${root}/`) ? topFolder(full) : null;
        if (top === ".git") return "git";
        return top !== null && !setHas(rootFolders, top) && existsSync(`${root}/${top}`) ? `late:${top}` : "readonly";
      }
      // A program the plugin ran (`git commit`) said so in its own words.
      const message = own("message");
      if (typeof message === "string" && textIndexOf(message, "Read-only file system") >= 0) {
        return textIndexOf(message, `${root}/.git/`) >= 0 ? "git" : "readonly";
      }
      const syscall = own("syscall");
      // A folder made (with its parents) at the read-only root: Node says ENOENT for it, not EROFS.
      if (code === "ENOENT" && syscall === "mkdir" && typeof path === "string" && startsWith(path, `${root}/`)) {
        const slash = textIndexOf(path, "/", root.length + 1);
        if (!existsSync(slash < 0 ? path : textSlice(path, 0, slash))) return "readonly";
      }
      // A Unix socket's error has no port, or (listening) port -1.
      const port = own("port");
      if (code === "EACCES" && (syscall === "connect" || syscall === "listen") && !(typeof port === "number" && port > 0)) return "socket";
      at = own("cause");
    } catch {
      return null;
    }
  }
  return null;
}

/** The first name of `path` below the root (`reports` for ROOT/reports/a.md). */
function topFolder(path) {
  const slash = textIndexOf(path, "/", root.length + 1);
  return slash < 0 ? null : textSlice(path, root.length + 1, slash);
}

/** What to do, for the import failures newcomers meet most, where Node's words do not say it. */
function newcomerHint(message) {
  const pkg = regexpExec(/Cannot find package '((?:@[\w.-]+\/)?[\w.-]+)'/, message);
  if (pkg !== null) {
    return ` (install it into plugins/node_modules: \`cd plugins && npm install --ignore-scripts ${pkg[1]}\`)`;
  }
  if (regexpExec(/\b(?:module|require|exports|__dirname|__filename) is not defined in ES module scope/, message) !== null) {
    return (
      " (a plugin is an ES module: it names its parts with export (`export const description = …`, `export function run`); " +
      "a CommonJS package loads with createRequire(import.meta.url) from node:module, and its folder is import.meta.dirname)"
    );
  }
  return "";
}

function importFailure(err, file) {
  if (err instanceof PluginExit) {
    return { message: `it called ${err.message.replace(" was called", "")}, and a plugin cannot end the plugin host`, at: location(err, file) };
  }
  let at = location(err, file);
  if (at === null && err instanceof SyntaxError) {
    try {
      at = syntaxLocation(file, toText(err.message));
    } catch {
      // Prototypes a plugin patched may throw here: the error is still said, with no place.
    }
  }
  const said = { message: headline(err), at };
  if (err instanceof SyntaxError && looksLikeTypeScript(file, at)) {
    said.message += " (it looks like TypeScript: a plugin is JavaScript, run as it is written, so take the types out, or compile it to .mjs)";
  }
  said.message += newcomerHint(said.message);
  return withNotes(said, err);
}

/**
 * Whether a value is a zod schema: zod 3's own `_def` holding its `typeName`, or zod 4's own `_zod`
 * holding its `def` (a property of a schema merely named `_def` is not one). No getter is run.
 */
function isZod(value) {
  if (value === null || typeof value !== "object") return false;
  try {
    const inner = (key, mark) => {
      const own = getOwn(value, key);
      const v = own !== undefined && hasOwn(own, "value") ? own.value : undefined;
      return v !== null && typeof v === "object" && getOwn(v, mark) !== undefined;
    };
    return inner("_def", "typeName") || inner("_zod", "def");
  } catch {
    return false;
  }
}

/**
 * Whether the line of the file where it did not parse (`at`, "LINE:COLUMN" in the file itself), or the
 * one before, holds TypeScript's own syntax: declarations, annotations, `as const`.
 */
function looksLikeTypeScript(file, at) {
  try {
    const place = typeof at === "string" ? regexpExec(/^(\d+):\d+$/, at) : null;
    if (place === null) return false;
    const lines = apply(split, apply(readFileSync, fs, [file, "utf8"]), ["\n"]);
    const n = Number(place[1]);
    const text = `${lines[n - 2] ?? ""}\n${lines[n - 1] ?? ""}`;
    const ts =
      /^\s*(?:export\s+)?(?:interface\s+\w|type\s+\w+(?:<[^>]*>)?\s*=|enum\s+\w+\s*\{|declare\s)|[\w)]\s*:\s*(?:string|number|boolean|any|unknown|void|Promise<|Record<)[\s\w<>\[\],|]*[,)=;{]|\bas\s+const\b/m;
    return regexpExec(ts, text) !== null;
  } catch {
    return false;
  }
}

// How deep headline is within itself: an error whose errors or cause hold it again (or an object
// holding it as its refused) would otherwise be described for ever.
let describing = 0;
/**
 * An error as String() gives it ("TypeError: x is not a function"), and the same of the errors it gives
 * as its `cause`, three at most: "TypeError: fetch failed" says little, its cause "connect ECONNREFUSED
 * 127.0.0.1:18642" says what went wrong. A cause is read only where it is a plain own value: a getter
 * there is the plugin's code, and is not run.
 */
function headline(err) {
  if (describing >= 2) return "…";
  describing++;
  try {
    return headlineOnce(err);
  } finally {
    describing--;
  }
}
function headlineOnce(err) {
  let text = errorWords(err);
  let at = err;
  let causes = 0;
  while (causes < 3 && text.length <= 1000) {
    let next;
    try {
      const own = at !== null && typeof at === "object" ? getOwn(at, "cause") : undefined;
      if (own === undefined || !hasOwn(own, "value") || own.value === undefined || own.value === at) break;
      next = own.value;
    } catch {
      break;
    }
    text += ` (cause: ${errorWords(next)}`;
    causes++;
    at = next;
  }
  return clip(text, 1000) + ")".repeat(causes);
}

/**
 * An error as String() gives it ("TypeError: x is not a function"), every line of its message (a failed
 * command's output follows its first line), and the first lines of an AggregateError's own errors.
 */
function errorWords(err) {
  let text;
  try {
    const message = err instanceof ErrorCtor ? null : ownMessage(err);
    // A plain object thrown with a message (`throw { message, code }`): its message is what it says.
    text = err instanceof ErrorCtor ? toText(err) : message !== null ? `${describe(err)}: ${message}` : describe(err);
    // A plain object thrown without a message (`throw { code, msg }`): what it holds is what it says.
    if (message === null && err !== null && typeof err === "object" && !(err instanceof ErrorCtor) && !isArray(err)) {
      const json = shortJson(err, 300);
      if (json !== "{}") text += `: ${json}`;
    }
  } catch {
    text = ownMessage(err) ?? "an error that cannot be shown";
  }
  const issues = ownIssues(err);
  if (issues !== null) text = `${errorName(err)}: ${issues}`;
  text = clip(trimEnd(text), 1000);
  const inner = ownErrors(err);
  if (inner.length > 0) text += ` (errors: ${joinWith(inner, "; ")})`;
  return text;
}

/**
 * A validation library's error said by its own `issues` (zod's, valibot's, Standard Schema's: each a
 * `message` and a `path`), whose message is their JSON over many lines: `branch: expected string; …`.
 * Null for any other error. No getter is run.
 */
function ownIssues(err) {
  try {
    const own = err instanceof ErrorCtor ? getOwn(err, "issues") : undefined;
    if (own === undefined || !isArray(own.value) || own.value.length === 0) return null;
    const said = [];
    for (const issue of own.value) {
      if (said.length === 5) {
        push(said, `${own.value.length - 5} more`);
        break;
      }
      const message = issue !== null && typeof issue === "object" ? getOwn(issue, "message")?.value : undefined;
      if (typeof message !== "string") return null;
      const path = getOwn(issue, "path")?.value;
      // A path's items are keys, or (valibot's) objects holding one; no getter or toString is run.
      const item = (p) => {
        if (p !== null && typeof p === "object") {
          const key = getOwn(p, "key");
          p = key !== undefined && hasOwn(key, "value") ? key.value : "?";
        }
        return typeof p === "string" || typeof p === "number" ? toText(p) : "?";
      };
      const at = isArray(path) && path.length > 0 ? `${clip(joinWith(path.slice(0, 32).map(item), "."), 60)}: ` : "";
      push(said, `${at}${clip(message, 200)}`);
    }
    return joinWith(said, "; ");
  } catch {
    return null;
  }
}

/** An object whose worth is not in its own keys, named for what it is; null for any other value. */
function namedObject(value) {
  if (value === null || typeof value !== "object") return null;
  if (value instanceof DateCtor) return "a Date";
  if (value instanceof MapCtor) return "a Map";
  if (value instanceof SetCtor) return "a Set";
  if (isView(value) || value instanceof ArrayBufferCtor) {
    const what = isBuffer(value) ? "a Buffer" : article(clip(toText(value.constructor?.name ?? "ArrayBuffer"), 40));
    return `${what} of ${value.byteLength} bytes (bytes are no text: decode them, as buffer.toString() does)`;
  }
  return null;
}

/** An error's name as its own String() would give it, where it is a string; else "Error". */
function errorName(err) {
  try {
    const name = err.name;
    return typeof name === "string" && name !== "" ? clip(name, 64) : "Error";
  } catch {
    return "Error";
  }
}

/**
 * A value as JSON, its first `max` characters, written by a walk of at most 2,000 values (a structure
 * that shares itself grows exponentially written out), through own data properties only (no getter or
 * toJSON is run); a value met again within itself is "…", a bigint written as JSON cannot.
 */
function shortJson(value, max) {
  let out = "";
  let budget = 2000;
  const within = [];
  const stop = {};
  const write = (v) => {
    if (out.length > max || --budget < 0) throw stop;
    if (v === null) {
      out += "null";
      return;
    }
    switch (typeof v) {
      case "string":
        out += stringify(clip(v, 100));
        return;
      case "number":
      case "boolean":
        out += toText(v);
        return;
      case "bigint":
        out += `${toText(v)}n`;
        return;
      case "object":
        break;
      default:
        out += "null";
        return;
    }
    if (within.includes(v) || within.length > 8) {
      out += "…";
      return;
    }
    push(within, v);
    const array = isArray(v);
    out += array ? "[" : "{";
    const keys = ownKeys(v);
    for (let i = 0; i < keys.length; i++) {
      if (i > 0) out += ",";
      if (!array) out += `${stringify(clip(keys[i], 64))}:`;
      const own = getOwn(v, keys[i]);
      if (own !== undefined && hasOwn(own, "value")) write(own.value);
      else out += "…";
    }
    out += array ? "]" : "}";
    within.pop();
  };
  try {
    write(value);
  } catch {
    // Past its bounds, or a proxy that refused: what was written is shown.
  }
  return clip(out, max);
}

/** An error's own `message`, where it is a plain string (no getter is run); else null. */
function ownMessage(err) {
  try {
    const own = err !== null && typeof err === "object" ? getOwn(err, "message") : undefined;
    return own !== undefined && typeof own.value === "string" ? own.value : null;
  } catch {
    return null;
  }
}

/**
 * The words of an AggregateError's own `errors` (three, and how many more); the array is read as data (no
 * getter on it is run), each error as headline gives it.
 */
function ownErrors(err) {
  const named = [];
  try {
    const own = err !== null && typeof err === "object" ? getOwn(err, "errors") : undefined;
    const all = own !== undefined && isArray(own.value) ? own.value : [];
    const count = all.length;
    for (let i = 0; i < count && i < 3; i++) {
      const slot = getOwn(all, i);
      const one = slot !== undefined && hasOwn(slot, "value") ? slot.value : undefined;
      let words;
      try {
        // Each with its cause: `Promise.any` over fetches says "fetch failed", its cause why.
        words = one instanceof ErrorCtor ? headline(one) : describe(one);
      } catch {
        words = ownMessage(one) ?? "an error that cannot be shown";
      }
      push(named, clip(trimEnd(words), 200));
    }
    if (count > 3) push(named, `and ${count - 3} more`);
  } catch {
    // A Proxy that throws: the errors go unnamed.
  }
  return named;
}

/**
 * "LINE:COLUMN" of the first stack frame in the plugin's own file, or "REL:LINE:COLUMN" for a module it
 * imports from plugins/ (shared code); null where Node gives no place.
 */
function location(err, file) {
  let stack = "";
  try {
    // A getter on `stack` is the plugin's code: the error is still shown, with no place.
    if (err instanceof Error && typeof err.stack === "string") stack = err.stack;
  } catch {
    stack = "";
  }
  const own = pathToFileURL(file).href;
  const shared = pluginsDir ? pathToFileURL(pluginsDir).href + "/" : null;
  let sharedAt = null;
  // A CommonJS module's frames name a path, not a URL: `at Object.<anonymous> (/…/plugins/lib/c.cjs:1:7)`.
  for (const match of stack.matchAll(/(file:\/\/[^\s()]+?|(?<=[(\s])\/[^\s()]+?):(\d+):(\d+)/g)) {
    const url = match[1].startsWith("/") ? pathToFileURL(match[1]).href : match[1];
    const line = match[2];
    const column = match[3];
    // The file's own line, and where in a module of plugins/ it was thrown when that lies deeper.
    if (url === own) return sharedAt === null ? `${line}:${column}` : `${line}:${column}, in ${sharedAt}`;
    if (sharedAt === null && shared !== null && url.startsWith(shared)) {
      sharedAt = `${path.relative(pluginsDir, fileURLToPath(url))}:${line}:${column}`;
    }
  }
  return sharedAt;
}

/** The first place in plugins/ an error's stack names, as `plugins/REL:LINE:COLUMN`, or null. */
function inPlugins(err) {
  if (!pluginsDir) return null;
  const places = placesIn(err instanceof Error && typeof err.stack === "string" ? err.stack : "", 1);
  return places.length > 0 ? places[0] : null;
}

/** The first `max` places in plugins/ a stack's text names, innermost first. */
function placesIn(stack, max) {
  const places = [];
  const place = /(file:\/\/[^\s()]+?):(\d+):(\d+)/g;
  let match;
  while (places.length < max && (match = regexpExec(place, stack)) !== null) {
    try {
      if (startsWith(match[1], pluginsURL)) push(places, placeOf(match[1], match[2], match[3]));
    } catch {
      // A place that cannot be read names none.
    }
  }
  return places;
}

/** A file of plugins/ (its URL) and a place in it, as rows show it: `plugins/REL:LINE:COLUMN`. */
function placeOf(url, line, column) {
  return `plugins/${pathRelative(pluginsDir, fileURLToPath(url))}:${line}:${column}`;
}

/**
 * Where a SyntaxError V8 gave no place for lies: in the file (`LINE:COLUMN`), or in the first module it
 * imports by a relative path, looked through in order, that `node --check` refuses (`lib/x.mjs:3:11`):
 * Node 20 names neither for an ESM module that fails to parse. `node --check` prints "PATH:LINE", the
 * source line and a caret under the column. Asked only when an import failed; at most 16 modules and
 * 2 s, and only scripts (`.mjs`, `.js`, `.cjs`: a JSON module is no script to check).
 */
function syntaxLocation(file, message) {
  // A missing export is found at linking, where every module parsed: no file's syntax is at fault.
  if (apply(includes, message, ["does not provide an export named"])) return null;
  const deadline = apply(nowMs, DateCtor, []) + 2000;
  const seen = new SetCtor();
  let looked = 0;
  const queue = [file];
  for (let i = 0; i < queue.length && looked < 16 && apply(nowMs, DateCtor, []) < deadline; i++) {
    const next = queue[i];
    if (setHas(seen, next)) continue;
    setAdd(seen, next);
    looked++;
    const at = checkedAt(next);
    if (at !== null) return next === file ? at : `${pathRelative(pluginsDir ?? dirnameOf(file), next)}:${at}`;
    let text;
    try {
      text = apply(readFileSync, fs, [next, "utf8"]);
    } catch {
      continue;
    }
    // Static imports and re-exports of a relative path: `from "./x.mjs"`, `import "./y.mjs"`.
    const imports = /(?:\bfrom|\bimport)\s*["'](\.{1,2}\/[^"'\n]+\.(?:mjs|js|cjs))["']/g;
    for (let m = regexpExec(imports, text); m !== null && queue.length < 64; m = regexpExec(imports, text)) {
      push(queue, resolvePath(dirnameOf(next), m[1]));
    }
  }
  return null;
}

/** Where `node --check` says a file's syntax fails, or null. */
function checkedAt(file) {
  const out = spawnSync(process.execPath, ["--check", file], { encoding: "utf8", timeout: 5000 });
  const lines = (out.stderr ?? "").split("\n");
  const head = /:(\d+)$/.exec(lines[0] ?? "");
  if (head === null) return null;
  const caret = (lines[2] ?? "").indexOf("^");
  return caret >= 0 ? `${head[1]}:${caret + 1}` : head[1];
}

function kind(value) {
  if (value === null) return "null";
  if (isArray(value)) return "array";
  return typeof value;
}

function article(word) {
  if (word === "null" || word === "undefined") return word;
  return (/^[aeiou]/.test(word) ? "an " : "a ") + word;
}

function kindWithArticle(value) {
  return article(kind(value));
}

function clip(text, max) {
  return text.length > max ? textSlice(text, 0, cutAt(text, max - 1)) + "…" : text;
}

function deepFreeze(value) {
  if (value !== null && typeof value === "object") {
    for (const inner of ownValues(value)) deepFreeze(inner);
    freeze(value);
  }
  return value;
}
