// The playground at /: a person's client of the gateway's own API, nothing else. It asks on
// /v1/streaming_query (or /v1/query), lists and reopens conversations (/v1/conversations), and
// answers tool approvals on /v1/responses with an mcp_approval_response item (README "MCP tools").
// Everything the server sends is shown as text (never as HTML), and links only when http(s).
"use strict";

const TOKEN_KEY = "parley.token";

const state = {
  conversationId: null,
  requestId: null,
  busy: false,
  /** Approval request ids already answered, from the conversation's history. */
  decided: new Set(),
};

const $ = (id) => document.getElementById(id);

/** An element with attributes and children (strings become text nodes). */
function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "className") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
  }
  return node;
}

/** A link when the URL is http(s), else its text: a document's URL comes from a knowledge store. */
function safeLink(url, text) {
  try {
    const parsed = new URL(url, document.baseURI);
    if (parsed.protocol === "http:" || parsed.protocol === "https:") return el("a", { href: parsed.href, target: "_blank", rel: "noopener noreferrer" }, text || url);
  } catch {
    // not a URL
  }
  return el("span", {}, text || String(url ?? ""));
}

function pretty(value) {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value, null, 2);
}

// ---------------------------------------------------------------------------------------------
// The API
// ---------------------------------------------------------------------------------------------

function headers(json) {
  const result = {};
  if (json) result["Content-Type"] = "application/json";
  const token = $("token").value.trim();
  if (token) result.Authorization = `Bearer ${token}`;
  return result;
}

class ApiFailure extends Error {
  constructor(status, response, cause) {
    super(`${response}${cause ? `: ${cause}` : ""}`);
    this.status = status;
    this.response = response;
    this.cause = cause;
  }
}

/** The answer's error envelope ({"detail": {"response", "cause"}}) as an ApiFailure. */
async function failureOf(response) {
  let detail = null;
  try {
    detail = (await response.json()).detail;
  } catch {
    // not JSON
  }
  if (detail && typeof detail === "object") return new ApiFailure(response.status, String(detail.response ?? response.statusText), String(detail.cause ?? ""));
  return new ApiFailure(response.status, `HTTP ${response.status}`, response.statusText);
}

async function api(path, { method = "GET", body, signal } = {}) {
  const response = await fetch(path, {
    method,
    headers: headers(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await failureOf(response);
  return response;
}

/** The `data:` payloads of a server-sent event stream, parsed, as they arrive. */
async function* sseData(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, ""))
        .join("\n");
      if (data && data !== "[DONE]") yield JSON.parse(data);
    }
  }
}

function describeFailure(error) {
  if (error instanceof ApiFailure) {
    const hint = error.status === 401 ? " This deployment needs a token: enter it at the top right." : "";
    return `${error.status} ${error.message}.${hint}`;
  }
  if (error && error.name === "AbortError") return "Stopped.";
  return `The gateway could not be reached: ${error && error.message ? error.message : error}`;
}

// ---------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------

function scrollToEnd() {
  const messages = $("messages");
  messages.scrollTop = messages.scrollHeight;
}

function clearMessages() {
  $("messages").replaceChildren();
}

function addUserMessage(text) {
  $("welcome")?.remove();
  $("messages").append(el("div", { className: "message user" }, el("div", { className: "bubble" }, text)));
  scrollToEnd();
}

/** An assistant answer being built: its text, then what stands behind it. */
function addAssistantMessage() {
  $("welcome")?.remove();
  const text = el("div", { className: "bubble" });
  const details = el("div", { className: "details" });
  const meta = el("div", { className: "meta" });
  const node = el("div", { className: "message assistant streaming" }, text, details, meta);
  $("messages").append(node);
  scrollToEnd();
  const sections = new Map();
  const section = (name, title) => {
    if (!sections.has(name)) {
      const list = el("div", { className: "section-body" });
      const block = el("section", { className: `detail ${name}` }, el("h3", {}, title), list);
      details.append(block);
      sections.set(name, list);
    }
    return sections.get(name);
  };
  const calls = new Map();
  return {
    node,
    appendText(piece) {
      text.append(piece);
      scrollToEnd();
    },
    setText(value) {
      text.textContent = value;
    },
    text: () => text.textContent,
    toolCall(call) {
      if (call.type === "mcp_approval_request") {
        section("approvals", "Approvals").append(approvalCard(call));
        return;
      }
      const pill = el("span", { className: "pill pending" }, "running");
      const result = el("div", { className: "tool-result" });
      const card = el(
        "details",
        { className: "tool", "data-tool": call.name },
        el("summary", { className: "tool-head" }, el("span", { className: "tool-name" }, toolLabel(call.name)), serverOf(call.args), pill),
        el("pre", { className: "args" }, pretty(argsWithoutServer(call.args))),
        result,
      );
      calls.set(call.id, { card, pill, result, name: call.name });
      section("tools", "Tool calls").append(card);
      scrollToEnd();
    },
    toolResult(result) {
      if (result.type === "mcp_approval_response") {
        section("approvals", "Approvals").append(el("div", { className: `approval-note ${result.status}` }, `Approval ${result.id}: ${result.status === "success" ? "approved" : "denied"}`));
        return;
      }
      const entry = calls.get(result.id);
      const content = el("pre", {}, entry?.name === "mcp_list_tools" ? listedTools(result.content) : pretty(result.content));
      if (!entry) {
        section("tools", "Tool calls").append(el("div", { className: "tool-result" }, content));
        return;
      }
      entry.pill.className = `pill ${result.status}`;
      entry.pill.textContent = result.status;
      entry.result.replaceChildren(content);
      if (entry.name === "file_search") this.chunks(fileSearchChunks(result.content));
    },
    documents(documents) {
      if (!documents || documents.length === 0) return;
      const list = el("ul", { className: "doc-list" });
      for (const doc of documents) {
        list.append(el("li", {}, safeLink(doc.doc_url, doc.doc_title || doc.doc_url || doc.document_id), el("span", { className: "muted" }, ` ${doc.source}`)));
      }
      section("documents", "Referenced documents").append(list);
    },
    chunks(chunks) {
      if (!chunks || chunks.length === 0) return;
      const list = section("chunks", "Knowledge chunks");
      for (const chunk of chunks) {
        list.append(
          el(
            "details",
            { className: "chunk" },
            el("summary", {}, el("span", { className: "score" }, Number(chunk.score).toFixed(3)), ` ${chunk.source} · `, safeLink(chunk.attributes?.doc_url, chunk.attributes?.title || chunk.attributes?.document_id || "chunk")),
            el("pre", {}, chunk.content),
          ),
        );
      }
    },
    error(message) {
      node.append(el("div", { className: "error" }, message));
      scrollToEnd();
    },
    note(message) {
      node.append(el("div", { className: "note" }, message));
    },
    /** A line above the answer saying what it answers (an approval rather than a question). */
    lead(message) {
      node.prepend(el("div", { className: "lead" }, message));
    },
    finish({ inputTokens, outputTokens, model } = {}) {
      node.classList.remove("streaming");
      const parts = [];
      if (model) parts.push(model);
      if (inputTokens !== undefined) parts.push(`${inputTokens} tokens in, ${outputTokens} out`);
      meta.textContent = parts.join(" · ");
      for (const entry of calls.values()) {
        if (!entry.pill.classList.contains("pending")) continue;
        entry.pill.className = "pill unknown";
        entry.pill.textContent = "no result";
      }
    },
  };
}

function serverOf(args) {
  return args && typeof args === "object" && args.server_label ? el("span", { className: "server" }, `on ${args.server_label}`) : null;
}

/** The gateway lists a server's tools as a call of its own: shown by what it is. */
function toolLabel(name) {
  return name === "mcp_list_tools" ? "list tools" : name;
}

function listedTools(content) {
  try {
    const listed = JSON.parse(content);
    return listed.tools.map((tool) => (tool.description ? `${tool.name}: ${tool.description}` : tool.name)).join("\n");
  } catch {
    return pretty(content);
  }
}

function argsWithoutServer(args) {
  if (!args || typeof args !== "object" || Array.isArray(args)) return args ?? {};
  const { server_label: _server, ...rest } = args;
  return rest;
}

/** A file_search result's hits as RAG chunks. */
function fileSearchChunks(content) {
  try {
    const results = JSON.parse(content);
    if (!Array.isArray(results)) return [];
    return results.map((hit) => ({ content: String(hit.text ?? ""), source: String(hit.vector_store_id ?? ""), score: Number(hit.score ?? 0), attributes: { ...(hit.attributes ?? {}), title: hit.filename } }));
  } catch {
    return [];
  }
}

function showQuotas(quotas) {
  const bar = $("quotas");
  if (!quotas) return;
  const entries = Object.entries(quotas);
  bar.hidden = false;
  bar.replaceChildren(
    el("span", { className: "label" }, "Quota left"),
    ...(entries.length === 0 ? [el("span", { className: "chip muted" }, "no limits apply")] : entries.map(([name, left]) => el("span", { className: `chip${left <= 0 ? " empty" : ""}`, "data-limiter": name }, `${name}: ${left} tokens`))),
  );
}

// ---------------------------------------------------------------------------------------------
// Approvals
// ---------------------------------------------------------------------------------------------

function approvalCard(request) {
  const reason = el("input", { type: "text", className: "reason", placeholder: "Reason (optional)", "aria-label": "Reason" });
  const status = el("div", { className: "approval-status" });
  const approveButton = el("button", { type: "button", className: "approve" }, "Approve");
  const denyButton = el("button", { type: "button", className: "deny" }, "Deny");
  const actions = el("div", { className: "approval-actions" }, reason, approveButton, denyButton);
  const card = el(
    "div",
    { className: "approval", "data-approval-id": request.id },
    el("div", { className: "tool-head" }, el("span", { className: "badge" }, "Approval needed"), el("span", { className: "tool-name" }, request.name), serverOf(request.args)),
    el("pre", { className: "args" }, pretty(argsWithoutServer(request.args))),
    actions,
    status,
  );
  const settle = (text, kind) => {
    actions.remove();
    status.className = `approval-status ${kind}`;
    status.textContent = text;
  };
  if (state.decided.has(request.id)) settle("Answered", "done");
  const answer = async (approve) => {
    if (state.busy) return;
    approveButton.disabled = denyButton.disabled = true;
    try {
      await answerApproval(request.id, approve, reason.value.trim());
      state.decided.add(request.id);
      settle(approve ? "Approved" : "Denied", approve ? "approved" : "denied");
    } catch (error) {
      approveButton.disabled = denyButton.disabled = false;
      status.className = "approval-status failed";
      status.textContent = describeFailure(error);
    }
  };
  approveButton.addEventListener("click", () => answer(true));
  denyButton.addEventListener("click", () => answer(false));
  return card;
}

/** Answers an approval on /v1/responses, continuing the conversation; shows what followed. */
async function answerApproval(id, approve, reason) {
  if (!state.conversationId) throw new Error("no conversation");
  setBusy(true);
  try {
    const item = { type: "mcp_approval_response", approval_request_id: id, approve, ...(reason ? { reason } : {}) };
    const response = await api("v1/responses", { method: "POST", body: { conversation: state.conversationId, input: [item] } });
    const body = await response.json();
    // A responses answer leaves out the server's own MCP lists and calls (UPSTREAM "MCP"); the
    // conversation's record of the turn has them, as the query endpoints show them.
    const detail = await (await api(`v1/conversations/${encodeURIComponent(state.conversationId)}`)).json();
    const turn = detail.chat_history.at(-1);
    const message = addAssistantMessage();
    message.lead(`${approve ? "Approved" : "Denied"} ${id}${reason ? `: ${reason}` : ""}`);
    for (const call of turn?.tool_calls ?? []) message.toolCall(call);
    for (const result of turn?.tool_results ?? []) message.toolResult(result);
    for (const output of body.output ?? []) {
      if (output.type === "file_search_call") message.chunks(fileSearchChunks(JSON.stringify(output.results ?? [])));
    }
    message.setText(body.output_text ?? "");
    message.finish({ model: body.model, inputTokens: body.usage?.input_tokens, outputTokens: body.usage?.output_tokens });
    showQuotas(body.available_quotas);
    refreshConversations(state.conversationId);
  } finally {
    setBusy(false);
  }
}

// ---------------------------------------------------------------------------------------------
// Asking
// ---------------------------------------------------------------------------------------------

function setBusy(busy) {
  state.busy = busy;
  $("send").disabled = busy;
  document.body.classList.toggle("busy", busy);
}

function queryBody(question) {
  const body = { query: question };
  if (state.conversationId) body.conversation_id = state.conversationId;
  const model = $("model").value;
  if (model) Object.assign(body, JSON.parse(model));
  if ($("no-tools").checked) body.no_tools = true;
  return body;
}

/** A new conversation's title until its topic summary is listed: its first question. */
function provisionalTitle(question) {
  const line = question.split("\n")[0];
  return line.length > 60 ? `${line.slice(0, 57)}…` : line;
}

function setConversation(id, title) {
  state.conversationId = id;
  $("conversation-title").textContent = title || (id ? "Conversation" : "New conversation");
  $("conversation-id").textContent = id ?? "";
  for (const item of document.querySelectorAll("#conversations li")) item.classList.toggle("active", item.dataset.id === id);
}

async function ask(question) {
  addUserMessage(question);
  const message = addAssistantMessage();
  setBusy(true);
  try {
    if ($("stream").checked) await askStreaming(question, message);
    else await askWhole(question, message);
  } catch (error) {
    message.error(describeFailure(error));
    message.finish();
  } finally {
    setBusy(false);
    state.requestId = null;
    $("stop").hidden = true;
  }
  refreshConversations(state.conversationId);
}

async function askStreaming(question, message) {
  const response = await api("v1/streaming_query", { method: "POST", body: queryBody(question) });
  let ended = false;
  for await (const { event, data, available_quotas } of sseData(response)) {
    switch (event) {
      case "start":
        if (state.conversationId !== data.conversation_id) setConversation(data.conversation_id, provisionalTitle(question));
        state.requestId = data.request_id;
        $("stop").hidden = false;
        break;
      case "token":
        message.appendText(data.token);
        break;
      case "tool_call":
        message.toolCall(data);
        break;
      case "tool_result":
        message.toolResult(data);
        break;
      case "turn_complete":
        message.setText(data.token);
        break;
      case "end":
        ended = true;
        message.documents(data.referenced_documents);
        message.chunks(data.rag_chunks);
        message.finish({ inputTokens: data.input_tokens, outputTokens: data.output_tokens });
        showQuotas(available_quotas);
        break;
      case "error":
        ended = true;
        message.error(`${data.status_code} ${data.response}: ${data.cause}`);
        message.finish();
        break;
      case "interrupted":
        ended = true;
        message.note("Stopped.");
        message.finish();
        break;
    }
  }
  if (!ended) {
    message.error("The answer ended early.");
    message.finish();
  }
}

async function askWhole(question, message) {
  const body = await (await api("v1/query", { method: "POST", body: queryBody(question) })).json();
  if (state.conversationId !== body.conversation_id) setConversation(body.conversation_id, provisionalTitle(question));
  for (const call of body.tool_calls ?? []) message.toolCall(call);
  for (const result of body.tool_results ?? []) message.toolResult(result);
  message.setText(body.response);
  message.documents(body.referenced_documents);
  message.chunks(body.rag_chunks);
  message.finish({ inputTokens: body.input_tokens, outputTokens: body.output_tokens });
  showQuotas(body.available_quotas);
}

async function stop() {
  if (!state.requestId) return;
  try {
    await api("v1/streaming_query/interrupt", { method: "POST", body: { request_id: state.requestId } });
  } catch (error) {
    $("conversations-note").textContent = describeFailure(error);
  }
}

// ---------------------------------------------------------------------------------------------
// Conversations
// ---------------------------------------------------------------------------------------------

function relativeTime(iso) {
  const seconds = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (!Number.isFinite(seconds)) return "";
  if (seconds < 60) return "just now";
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

let refreshing = 0;

/**
 * The caller's conversations. The list is fed after each answer (it lags by moments), so when
 * `expected` is not in it yet, it is asked again a few times.
 */
async function refreshConversations(expected) {
  const attempt = ++refreshing;
  const note = $("conversations-note");
  for (let tries = 0; tries < 8; tries++) {
    let conversations;
    try {
      conversations = (await (await api("v1/conversations")).json()).conversations;
    } catch (error) {
      note.textContent = describeFailure(error);
      return;
    }
    if (attempt !== refreshing) return;
    renderConversations(conversations);
    note.textContent = conversations.length === 0 ? "No conversations yet." : "";
    if (!expected || conversations.some((c) => c.conversation_id === expected)) return;
    await new Promise((resolve) => setTimeout(resolve, 400));
  }
}

function renderConversations(conversations) {
  const sorted = [...conversations].sort((a, b) => Date.parse(b.last_message_at) - Date.parse(a.last_message_at));
  $("conversations").replaceChildren(
    ...sorted.map((c) => {
      const title = c.topic_summary || `Conversation ${c.conversation_id.slice(0, 8)}`;
      const item = el(
        "li",
        { "data-id": c.conversation_id, className: c.conversation_id === state.conversationId ? "active" : "" },
        el(
          "button",
          { type: "button", className: "open", title: c.conversation_id, onclick: () => openConversation(c.conversation_id, title) },
          el("span", { className: "title" }, title),
          el("span", { className: "sub" }, `${relativeTime(c.last_message_at)} · ${c.message_count} message${c.message_count === 1 ? "" : "s"}${c.last_used_model ? ` · ${c.last_used_model}` : ""}`),
        ),
        el("button", { type: "button", className: "icon delete", title: "Delete", "aria-label": `Delete ${title}`, onclick: () => deleteConversation(c.conversation_id, title) }, "×"),
      );
      if (c.conversation_id === state.conversationId) $("conversation-title").textContent = title;
      return item;
    }),
  );
}

async function openConversation(id, title) {
  if (state.busy) return;
  setConversation(id, title);
  clearMessages();
  let detail;
  try {
    detail = await (await api(`v1/conversations/${encodeURIComponent(id)}`)).json();
  } catch (error) {
    $("messages").append(el("div", { className: "error" }, describeFailure(error)));
    return;
  }
  state.decided = new Set(detail.chat_history.flatMap((turn) => turn.tool_results.filter((r) => r.type === "mcp_approval_response").map((r) => r.id)));
  for (const turn of detail.chat_history) {
    const user = turn.messages.find((m) => m.type === "user");
    const assistant = turn.messages.find((m) => m.type === "assistant");
    if (user && user.content) addUserMessage(user.content);
    const message = addAssistantMessage();
    for (const call of turn.tool_calls) message.toolCall(call);
    for (const result of turn.tool_results) message.toolResult(result);
    message.setText(assistant ? assistant.content : "");
    if (turn.status && turn.status !== "completed") message.note(`This turn ended ${turn.status}.`);
    message.finish({ model: turn.model });
  }
  if (detail.chat_history.length === 0) $("messages").append(el("p", { className: "muted" }, "No messages in this conversation yet."));
}

async function deleteConversation(id, title) {
  if (!window.confirm(`Delete "${title}"?`)) return;
  try {
    await api(`v1/conversations/${encodeURIComponent(id)}`, { method: "DELETE" });
  } catch (error) {
    $("conversations-note").textContent = describeFailure(error);
    return;
  }
  if (state.conversationId === id) newConversation();
  refreshConversations();
}

function newConversation() {
  setConversation(null);
  state.decided = new Set();
  clearMessages();
  $("quotas").hidden = true;
  $("question").focus();
}

async function loadModels() {
  try {
    const { models } = await (await api("v1/models?model_type=llm")).json();
    const select = $("model");
    select.replaceChildren(el("option", { value: "" }, "Default model"));
    for (const model of models) {
      select.append(el("option", { value: JSON.stringify({ model: model.provider_resource_id, provider: model.provider_id }) }, model.identifier));
    }
    select.hidden = models.length === 0;
  } catch {
    // No model list (no permission, backend down): the server's default model is used.
  }
}

// ---------------------------------------------------------------------------------------------
// Wiring
// ---------------------------------------------------------------------------------------------

function start() {
  const token = $("token");
  token.value = sessionStorage.getItem(TOKEN_KEY) ?? "";
  token.addEventListener("change", () => {
    if (token.value.trim()) sessionStorage.setItem(TOKEN_KEY, token.value.trim());
    else sessionStorage.removeItem(TOKEN_KEY);
    refreshConversations();
    loadModels();
  });
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const question = $("question").value.trim();
    if (!question || state.busy) return;
    $("question").value = "";
    ask(question);
  });
  $("question").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("stop").addEventListener("click", stop);
  $("new-conversation").addEventListener("click", newConversation);
  $("refresh-conversations").addEventListener("click", () => refreshConversations());
  refreshConversations();
  loadModels();
  $("question").focus();
}

start();
