// Live updates of the web DVR (web/events.h).
#include "web/events.h"

#include <algorithm>
#include <chrono>

#include "capture/capture.h"
#include "serve/log.h"

namespace agentenv::web {

std::vector<std::string> Listener::Take(int ms) {
  MutexLock lock(mu_);
  if (q_.empty()) cv_.wait_for(lock, std::chrono::milliseconds(ms));
  std::vector<std::string> out(std::make_move_iterator(q_.begin()), std::make_move_iterator(q_.end()));
  q_.clear();
  return out;
}

void Listener::Push(const std::string& event) {
  MutexLock lock(mu_);
  if (q_.size() >= kMaxQueued) {
    q_.clear();  // too far behind: what it missed is replaced by one resync
    q_.push_back(EventHub::Sse("resync", json::object()));
  } else {
    q_.push_back(event);
  }
  cv_.notify_all();
}

size_t Listener::queued() {
  MutexLock lock(mu_);
  return q_.size();
}

EventHub::~EventHub() { Stop(); }

std::string EventHub::Sse(const std::string& type, const json& data) {
  return "event: " + type + "\ndata: " + data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

std::shared_ptr<Listener> EventHub::Subscribe() {
  MutexLock lock(mu_);
  if (stop_ || listeners_.size() >= kMaxListeners) return nullptr;
  auto l = std::make_shared<Listener>();
  listeners_.push_back(l);
  if (!started_) {
    started_ = true;
    poller_ = std::thread([this] { Run(); });
  }
  cv_.notify_all();
  return l;
}

void EventHub::Unsubscribe(const std::shared_ptr<Listener>& l) {
  MutexLock lock(mu_);
  listeners_.erase(std::remove(listeners_.begin(), listeners_.end(), l), listeners_.end());
}

size_t EventHub::listeners() {
  MutexLock lock(mu_);
  return listeners_.size();
}

void EventHub::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (poller_.joinable()) poller_.join();
}

void EventHub::Publish(const std::string& event) {
  MutexLock lock(mu_);
  for (auto& l : listeners_) l->Push(event);
}

void EventHub::Run() {
  std::string last_error;
  while (!stop_) {
    {
      MutexLock lock(mu_);
      if (!stop_) cv_.wait_for(lock, std::chrono::milliseconds(kPollMs));
      // Idle while nobody listens: no page, no polling.
      while (!stop_ && listeners_.empty()) cv_.wait(lock);
    }
    if (stop_) break;
    auto change = index_.Poll();
    if (!change) {
      if (change.error().message != last_error) serve::Log("web: " + change.error().message);
      last_error = change.error().message;
      continue;
    }
    last_error.clear();
    if (change->dropped) {
      Publish(Sse("resync", json::object()));
      continue;
    }
    if (!change->added.empty()) Publish(Sse("nodes", json{{"nodes", change->added}}));
    if (change->head_moved || change->tags_changed)
      Publish(Sse("refs", json{{"head_moved", change->head_moved}, {"tags_changed", change->tags_changed}}));
  }
}

}  // namespace agentenv::web
